"""The reward-hack suite (issue 19): probes that try to fake a reward or a strict verdict."""
