# a zip archive appended after the PNG's IEND chunk (binwalk sees it; zip readers find it from the end)
python3 -c "import zipfile; print(zipfile.ZipFile('sunset.png').read('flag.txt').decode().strip())"
