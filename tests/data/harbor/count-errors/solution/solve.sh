#!/bin/bash
# whole words only: "errors" and "terrorism" do not count
grep -ciw error /app/service.log > /app/answer.txt
