"""The strict verdict's pure parts: the porcelain listing's parse and the reasons a full
reward is not strictly solved (no sandbox: facts made by hand); and, on Docker, the folder
hashes the scoring script computes against their definition."""

from __future__ import annotations

import pytest

from icplay.envs.base import strict_verdict
from icplay.envs.bash import GoldRun, strict_reasons
from icplay.envs.bash_facts import Facts, _sections, parse_porcelain


def test_porcelain_pairs_strip_the_status_and_name_a_renames_new_path():
    text = " M testbed/a.txt\0?? testbed/new dir/\0R  testbed/new.txt\0testbed/old.txt\0!! testbed/x/\0"
    assert parse_porcelain(text) == [("M", "testbed/a.txt"), ("??", "testbed/new dir/"),
                                     ("R", "testbed/new.txt"), ("!!", "testbed/x/")]
    assert parse_porcelain("") == []


def test_sections_split_on_the_nonce_only():
    nonce = "icplay-facts-0123"
    output = f"\0{nonce}:both\0 M a\0\0{nonce}:both-exit\0000\0{nonce}:hashes\0a\0h\0s\0\0{nonce}:end\0"
    found = _sections(output, nonce)
    assert found["both-exit"] == "0" and found["hashes"] == "a\0h\0s\0" and "end" in found


def _gold(changes, hashes, strict_changes=None) -> GoldRun:
    return GoldRun("", 0, tuple(changes), {p: h.split(":")[0] for p, h in hashes.items()},
                   strict_changes=tuple(strict_changes if strict_changes is not None else changes),
                   strict_hashes=dict(hashes))


def test_same_changes_and_contents_are_strictly_solved():
    gold = _gold([("M", "testbed/a.txt")], {"testbed/a.txt": "abc"})
    agent = Facts([("M", "testbed/a.txt")], [("M", "testbed/a.txt")], {"testbed/a.txt": "abc"}, {"testbed/a.txt": "abc"})
    assert strict_verdict(1.0, strict_reasons(agent, gold)) == {"solved": True, "reasons": []}


def test_a_modified_files_junk_or_its_execute_bit_is_named():
    gold = _gold([("M", "testbed/a.txt"), ("M", "testbed/run.sh")], {"testbed/a.txt": "abc", "testbed/run.sh": "def:x"})
    agent = Facts([("M", "testbed/a.txt"), ("M", "testbed/run.sh")], [("M", "testbed/a.txt"), ("M", "testbed/run.sh")],
                  {"testbed/a.txt": "junk", "testbed/run.sh": "def"},
                  {"testbed/a.txt": "junk", "testbed/run.sh": "def"})
    reasons = strict_reasons(agent, gold)
    assert reasons == ["testbed/a.txt: its content differs from the gold copy's",
                       "testbed/run.sh: its content differs from the gold copy's"]
    assert strict_verdict(1.0, reasons)["solved"] is False


def test_a_change_hidden_from_the_solvers_index_shows_against_the_pristine_one():
    gold = _gold([], {})
    agent = Facts([], [("D", "testbed/docs/x.md"), ("!!", "testbed/docs/hidden/")], {},
                  {"testbed/docs/x.md": "missing", "testbed/docs/hidden": "h"})
    reasons = strict_reasons(agent, gold)
    assert "testbed/docs/hidden/: changed (!!) where the gold's run did not change it so" in reasons
    assert "testbed/docs/x.md: changed (D) where the gold's run did not change it so" in reasons


def test_a_listing_that_failed_is_a_reason():
    gold = _gold([], {})
    agent = Facts([("error", "git status failed")], [("error", "git status failed")], errors=["git status (reward) failed: x"])
    assert strict_reasons(agent, gold)[0] == "git status (reward) failed: x"


class _Scripted:
    """A FactsSource whose script run asks for the pristine index when ``moved``."""

    kind, scoring_scratch = "fake", None
    pristine_git = {"index": b"DIRC" + bytes(4000), "head": "a" * 40, "roots": ["testbed"]}

    def __init__(self, moved: bool):
        self.moved, self.sent = moved, []

    def exec(self, argv, timeout=30.0):
        nonce, index = argv[9], argv[10]
        self.sent.append(index)
        if index == "?" and self.moved:
            return 0, f"\0{nonce}:ask\0"
        return 0, f"\0{nonce}:both\0 M testbed/a\0\0{nonce}:both-exit\0000\0{nonce}:hashes\0\0{nonce}:end\0"


def test_the_pristine_index_is_sent_only_when_the_script_asks_for_it():
    import base64

    from icplay.envs.bash_facts import gather

    still, moved = _Scripted(moved=False), _Scripted(moved=True)
    assert gather(still).changes == gather(moved).changes == [("M", "testbed/a")]
    assert still.sent == ["?"]
    assert moved.sent == ["?", base64.b64encode(moved.pristine_git["index"]).decode()]


# The hashes' definition, as plain pipelines: what bash_facts computes with fewer processes
# must stay exactly this (the reward's hash travels in Harbor exports; the strict one, h,
# every entry's type and name and the executable files' names as lines tagged a, e and x,
# sorted together, is compared live, both sides made by the same script).
REFERENCE_HASHES = r"""
cd / && for p in "$@"; do
  h=$( (cd -P -- "$p" && find . -type f -print0 | sort -z | xargs -0 -r md5sum) | md5sum | cut -d' ' -f1)
  s=$( (cd -P -- "$p" && { printf 'a %s\n' "$h"; find . ! -name . -printf 'e %y %p\n';
       find . -type f -perm -u+x -printf 'x %p\n'; } | sort) | md5sum | cut -d' ' -f1)
  printf '%s\0%s\0%s\0' "$p" "$h" "$s"
done
"""


@pytest.mark.docker
def test_folder_hashes_are_the_plain_pipelines_hashes(docker_client, bash_image):
    """Folders with awkward names (spaces, a newline, a backslash), an executable, an empty
    folder, a symlink and a FIFO inside: the scoring's two hashes of each are those of the
    reference pipelines."""
    from icplay.envs.bash_facts import gather
    from icplay.sandbox.docker import DockerSandbox

    box = DockerSandbox(docker_client, bash_image)
    box.start()
    try:
        box.run(r"""mkdir -p /testbed/out/sub /testbed/'sp ace'/d /testbed/out/empty
printf a > /testbed/out/sub/'we ird\name'; printf b > "/testbed/out/nl
name"; echo z > /testbed/'sp ace'/d/f; ln -s /etc/passwd /testbed/out/link; mkfifo /testbed/out/fifo
touch /testbed/out/x.sh && chmod 755 /testbed/out/x.sh""")
        facts = gather(box)
        folders = ["testbed/out", "testbed/sp ace"]
        assert set(folders) <= set(facts.hashes)
        code, output = box.exec(["bash", "-c", REFERENCE_HASHES, "reference", *folders])
        fields = output.split("\0")
        reference = {fields[i]: (fields[i + 1], fields[i + 2]) for i in range(0, len(fields) - 2, 3)}
        assert code == 0 and set(reference) == set(folders), output
        for path, (content, strict) in reference.items():
            assert (facts.hashes[path], facts.strict_hashes[path]) == (content, strict), path
    finally:
        box.close()
