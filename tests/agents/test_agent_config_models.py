"""config.toml's [agent] carries the request's parameters, checked when read (one sentence
naming the file and the setting); the command line wins over it."""

import argparse

import pytest

from icplay.agents.families import add_model_arguments, model_options_of
from icplay.frontend.config import ConfigError, load_config


def write(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_agent_settings_reach_the_model_options(tmp_path):
    path = write(tmp_path, '[agent]\nmodel = "o3"\nmax_tokens = 24000\ntemperature = "default"\n'
                           'reasoning_effort = "low"\nseed = 7\nextra_body = { top_k = 20 }\n')
    config = load_config(path, environ={})
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    assert model_options_of(parser.parse_args([]), config.agent) == {
        "max_tokens": 24000, "temperature": "default", "reasoning_effort": "low", "seed": 7,
        "extra_body": {"top_k": 20}}
    given = parser.parse_args(["--max-tokens", "9000", "--temperature", "0.3"])
    options = model_options_of(given, config.agent)
    assert options["max_tokens"] == 9000 and options["temperature"] == 0.3 and options["seed"] == 7


@pytest.mark.parametrize("line, message", [
    ("max_tokens = \"lots\"", "setting 'agent.max_tokens' 'lots': expected a whole number"),
    ("temperature = \"warm\"", "setting 'agent.temperature' 'warm': expected a number or 'default'"),
    ("reasoning_effort = \"extreme\"", "setting 'agent.reasoning_effort' 'extreme': one of"),
    ("extra_body = \"[1]\"", "setting 'agent.extra_body': expected a JSON object"),
    ("seed = [1]", "setting 'agent.seed' must be a string, number or table, got list"),
])
def test_a_bad_agent_setting_is_one_sentence_naming_file_and_setting(tmp_path, line, message):
    path = write(tmp_path, f"[agent]\n{line}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert str(err.value).startswith(str(path)) and message in str(err.value)
