"""CTF: capture the flag in a shell over the task's files (InterCode-CTF).

The shell is the Bash environment's persistent session in a Docker container of the
``icplay-ctf`` image (InterCode-CTF's tools) or in bubblewrap over the host's tools; the
task's files are copied to ``/ctf/<id>`` at the start of each episode, the shell starts
there and the task's ``setup`` runs first. ``submit <flag>`` scores 1 when the flag equals
the gold flag, case-insensitive (``reward.py``).
"""
