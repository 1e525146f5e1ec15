"""The verifiers an exported Harbor task runs in its container (``tests/verify.py``).

Each module here is copied into the task's ``tests/`` folder with the icplay modules it
imports (pure reward code, standard library only) under ``tests/lib``, and run there by
``/usr/bin/python3 -I -S`` under ``env -i``: nothing of the agent's PATH, environment or
site-packages reaches it. ``main()`` is each module's entry point; every failure is a
reward of 0 with the reason in ``/logs/verifier/details.json``.
"""
