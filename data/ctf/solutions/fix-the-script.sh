# a missing colon after the def and a missing closing parenthesis
sed -i -e 's/^def decode(values)$/def decode(values):/' -e 's/^print(decode(data)$/print(decode(data))/' decode.py && python3 decode.py
