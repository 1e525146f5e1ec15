tr 'A-Za-z' 'N-ZA-Mn-za-m' < memo.txt | grep -o 'icplay{[^}]*}'
