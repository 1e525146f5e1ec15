# strings shows the one upper-case candidate; the check ignores case
./vault "$(strings -n 8 vault | grep -E '^[A-Z0-9_]+$' | head -1)"
