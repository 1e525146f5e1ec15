mkdir -p /tmp/dolls && tar -xzf doll.tar.gz -C /tmp/dolls && cd /tmp/dolls/doll2 && unzip -oq doll3.zip && tar -xjf doll4.tar.bz2 && cat doll5/flag.txt; cd - >/dev/null
