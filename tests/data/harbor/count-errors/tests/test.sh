#!/bin/bash
# The verifier: compares /app/answer.txt with the expected count kept beside this script.
mkdir -p /logs/verifier
expected=$(cat /tests/expected.txt)
answer=$(tr -d '[:space:]' < /app/answer.txt 2>/dev/null)
if [ -n "$answer" ] && [ "$answer" = "$expected" ]; then
  echo "PASS: $answer"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: expected $expected, got '${answer}'"
  echo 0 > /logs/verifier/reward.txt
fi
