#!/bin/bash
# Writes reward.json: the script exists and is executable, and it prints $GREETING (from task.toml).
mkdir -p /logs/verifier
runs=0; prints=0
[ -x /app/greet.sh ] && runs=1
[ "$runs" = 1 ] && [ "$(/app/greet.sh)" = "$GREETING" ] && prints=1
reward=$(( runs * prints ))
echo "runs=$runs prints=$prints"
printf '{"reward": %s, "executable": %s}\n' "$reward" "$runs" > /logs/verifier/reward.json
