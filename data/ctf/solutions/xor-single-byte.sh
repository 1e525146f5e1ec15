# the key is the first byte XOR 'i'
python3 -c "
data = open('secret.bin', 'rb').read(); key = data[0] ^ ord('i')
print(bytes(b ^ key for b in data).decode())"
