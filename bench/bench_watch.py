"""The watch screen stays responsive while a model streams and its command floods output.

Run: .venv/bin/python bench/bench_watch.py [--sandbox bwrap|docker] [--keys 40] [--rate 50]

The app runs headless (Textual's test driver renders every frame as in a terminal) on a
Bash task, with the real openai client against the local fake server
(tests/agents/fake_openai_server.py). A probe types one character into the command line
every 50 ms and measures the time from posting the key event until the line holds it (as
bench/bench_tui.py does). Phases, all in this one run:

- idle: human mode, the episode waits for the human (the baseline);
- streaming: auto mode, the model writes a long reply at ``--rate`` tokens/s (one token = a
  streamed chunk of 4 characters), each piece an event into the agent panel;
- flooding: the proposed command (a paced flood, ~4 s of output) runs.

Prints median / p95 / max latency per phase and the ratio of each to the idle baseline.
The bar (issue 9): max under 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "agents"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_tui import probe_key, summary, wait_until  # noqa: E402
from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced  # noqa: E402

from icplay.tui.app import PlayApp  # noqa: E402
from icplay.frontend.config import AgentChoice, Config  # noqa: E402
from icplay.tui.screens.live import LiveScreen  # noqa: E402

FLOOD = "for i in $(seq 1 80); do seq -f 'line %g of a steady flood of output' 1 400; sleep 0.05; done"


def stats(samples: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in samples)
    return (ms[len(ms) // 2], ms[-1]) if ms else (0.0, 0.0)


async def bench(sandbox: str, keys: int, rate: float, seconds: float) -> list[str]:
    thought = "Thought: " + " ".join(f"step{i} of the plan," for i in range(int(rate * seconds * 4 / 16)))
    reply = Reply(thought + "\n" + fenced(FLOOD, "bash"), chunk_size=4, chunk_delay=1.0 / rate)
    fake = FakeOpenAIServer(Script([reply], then="submit")).start()
    os.environ.pop("OPENAI_API_KEY", None)
    app = PlayApp(env="bash", tasks="bash", task="b001", sandbox=sandbox, config=Config(history=False),
                  watch=AgentChoice(policy="llm", model="bench", base_url=fake.url, mode="human"))
    lines = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            screen = None

            def ready() -> bool:
                nonlocal screen
                screen = next((s for s in app.screen_stack if isinstance(s, LiveScreen) and s.agent is not None), None)
                return screen is not None and screen.request is not None and screen.request.kind == "action"

            await wait_until(ready, 60)
            command = screen.pane.command
            command.focus()
            idle = []
            for _ in range(keys):
                idle.append(await probe_key(app, command))
                await asyncio.sleep(0.05)
            await pilot.press("alt+1")                        # auto: the model is asked
            await wait_until(lambda: screen.agent_state == "thinking", 10)
            streaming = []
            while screen.agent_state == "thinking":
                streaming.append(await probe_key(app, command, "y"))
                await asyncio.sleep(0.05)
            streamed_chars = len(screen.panel.stream)        # what reached the panel as deltas
            await wait_until(lambda: screen.state == "running", 30)
            flooding = []
            while screen.state == "running":
                flooding.append(await probe_key(app, command, "z"))
                await asyncio.sleep(0.05)
            await pilot.press("f12")
            await wait_until(lambda: screen.state in ("stopped", "submitted"), 30)
            if not fake.streamed or streamed_chars < 100:
                raise SystemExit("the reply did not stream: the figures would not mean anything")
    finally:
        app.close_envs()
        fake.stop()
    base_median, base_max = stats(idle)
    lines.append(summary("watch: idle (baseline)", idle))
    for name, samples in ((f"watch: model streaming {rate:g} tok/s", streaming),
                          ("watch: command flooding output", flooding)):
        median, worst = stats(samples)
        ratio = (f"   ×{median / base_median:.1f} median, ×{worst / base_max:.1f} max vs idle"
                 if base_median and base_max else "")
        lines.append(summary(name, samples) + ratio)
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sandbox", default="bwrap")
    parser.add_argument("--keys", type=int, default=40, help="keys measured while idle")
    parser.add_argument("--rate", type=float, default=50.0, help="streamed tokens per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the model streams")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="icplay-bench-") as tmp:
        os.environ["ICPLAY_HOME"] = tmp
        lines = await bench(args.sandbox, args.keys, args.rate, args.seconds)
    print("Key latency in the watch screen (post -> command line updated), headless 120x40:")
    for line in lines:
        print("  " + line)


if __name__ == "__main__":
    asyncio.run(main())
