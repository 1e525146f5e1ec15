mkdir -p /tmp/proj && tar -xzf project.tar.gz -C /tmp/proj && git -c safe.directory='*' -C /tmp/proj/project log -p --all | grep -o 'icplay{[^}]*}' | head -1
