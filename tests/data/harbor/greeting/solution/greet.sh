#!/bin/bash
echo "hello, harbor"
