"""Names vulture takes for unused that are used where it cannot see: called by a framework or
another program, looked up by name, or read only by tests and benchmarks. Read by vulture
with icplay/ (pyproject's [tool.vulture]; tests/test_checks.py runs it); never imported.

Patterns (Textual's ``action_*``/``on_*`` handlers, class-level CSS) and decorators that
register what they decorate are in pyproject's [tool.vulture], each with its reason.
Each entry below names where the use is. Whatever is dead is deleted, not listed here.
"""
# ruff: noqa
_ = None

# -- named in a signature someone else calls ---------------------------------------------
exc_info          # __exit__/__aexit__ (icplay/aio.py, icplay/envs/admission.py)
frame             # a signal handler's (icplay/process.py)
parameters        # Textual's check_action(action, parameters) (tui/widgets, tui/screens/live.py)
timeout_s         # OpenEnv's Environment.step(action, timeout_s) (icplay/serve/openenv.py)
find_class        # pickle.Unpickler's hook (icplay/sql/sqlite_worker.py)
IcplaySqlEnv      # a TYPE_CHECKING import named in a string: cast("IcplaySqlEnv", ...) (compat/intercode.py)
_.contains        # gymnasium's Space.contains (icplay/gym/env.py)

# -- attributes a library reads ------------------------------------------------------------
_.action_space, _.observation_space                     # gymnasium's Env (icplay/gym/env.py)
_.uname, _.gname, _.gid, _.mtime                         # tarfile.TarInfo (sandbox/files.py, harbor/verify.py)
_.trust_env                                              # requests.Session (sandbox/images.py)
SUPPORTS_CONCURRENT_SESSIONS, _.step_count, _.get_metadata   # OpenEnv's Environment (serve/openenv.py)
model_config                                             # pydantic's model settings (StrictReset, serve/openenv.py)
_.border_subtitle, _.cursor_blink, _.disabled, _.virtual_size, _.show_root, _.auto_width  # Textual widgets'

# -- found by name: "module:name" strings in a language's, a scheme's or a scanner's table ----
SPEC                                              # each language module's spec (languages/registry.py)
make_bash_env, SharedBashEnvs                     # languages/bash.py
make_python_env, SharedPythonEnvs, PythonPane     # languages/python.py
make_sql_env, load_sqlglot, check_gold_set        # languages/sql.py (its warm-up, its gold check)
make_ctf_env, CtfEnvFactory, CtfPane              # ctf/spec.py
HarborEnvFactory                                  # harbor/spec.py
is_harbor, load_harbor                            # tasks/registry.py's SCHEMES
submit_without_looking, format_error, model_reply, error_run                 # scan/registry.py's
command_not_found, missing_module, permission_denied, dead_shell             # built-in scanners
reward_hack, touches_scoring
_.negative        # report.py's rows name their Summary field as a string (_when_any)

# -- the library's public API (docs/*.md), used by its callers, not by icplay itself ------
PRICES_READ                  # docs/agents.md: the date the price table was read
sql_reward                   # docs/rewards.md
run_episodes, _.from_spec    # docs/scale.md (executors)
environment_class            # docs/library.md (TRL)
NOMINAL                      # study/stats.py: a metric to pass to krippendorff_alpha
EXIT_NO_START                # python/interpreter.py: the client's exit code 4, named where it is read
EVAL_OBS, _.get_available_actions, CTFEnv   # compat/intercode.py: InterCode's own API (docs/library.md)

# -- state read by tests and benchmarks only ---------------------------------------------
_.held_bytes                 # tests/hostile/test_docker_output.py: output held stays bounded
_.disk_bounded               # tests/hostile/test_bwrap_hostile.py
_.last_recycle_note          # tests/test_recycle.py, tests/test_podman.py
open_trajectories            # tests/test_store_attempts.py
_.from_sets                  # tests/tui/tui_helpers.py, bench/bench_tui.py
_.plain_lines                # the TUI tests read the output pane's text
_.chars_written              # bench/bench_tui.py
_.agent_state, _.cancelled_calls   # tests/tui/test_watch.py, bench/bench_watch.py
