# a tEXt chunk (exiftool holiday.png shows it as Comment)
strings holiday.png | grep -o 'icplay{[^}]*}'
