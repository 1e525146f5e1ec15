# `file report.pdf` says gzip
gunzip -c < report.pdf | grep -o 'icplay{[^}]*}'
