# base64 -> gzip -> base32 -> hex (`file` on each layer tells which comes next)
base64 -d layers.txt | gunzip | base32 -d | xxd -r -p; echo
