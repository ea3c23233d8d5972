"""The quota file: what it declares, and the one-line errors that name the file and the field."""

from __future__ import annotations

import pytest

from dlsched.core import InputError, QuotaEntry, Quotas, load_quotas
from dlsched.core.quota import quotas_from_mapping

GOOD = """\
teams:
  vision: {gpus: 16, borrowing_limit: 8}
  nlp: {gpus: 8}
users:
  alice: {gpus: 8, team: vision}
  bob: {gpus: 4, borrowing_limit: 2}
default_user: {gpus: 2}
"""


def test_the_file_declares_teams_users_their_teams_and_the_default(tmp_path):
    path = tmp_path / "quotas.yaml"
    path.write_text(GOOD)
    q = load_quotas(path)
    assert q.teams == {"vision": QuotaEntry(16, 8), "nlp": QuotaEntry(8, None)}
    assert q.users == {"alice": QuotaEntry(8, None), "bob": QuotaEntry(4, 2)}
    assert q.team("alice") == "vision" and q.team("bob") is None and q.team("carol") is None
    assert q.user_entry("carol") == QuotaEntry(2, None)  # an unlisted user gets the default
    assert q.cohort_gpus() == 24 and q.team_members("vision") == ["alice"]
    assert QuotaEntry(16, 8).ceiling == 24 and QuotaEntry(8).ceiling == float("inf")


@pytest.mark.parametrize(("text", "field", "words"), [
    ("teams: {vision: {gpus: -1}}", "teams.vision.gpus", "must be in [0, 1000000], got -1"),
    ("teams: {vision: {gpus: 4, borrowing_limit: 2.5}}", "teams.vision.borrowing_limit", "whole number"),
    ("teams: {vision: {gpus: true}}", "teams.vision.gpus", "whole number"),
    ("teams: {vision: {borrowing_limit: 2}}", "teams.vision.gpus", "missing"),
    ("teams: {vision: {gpus: 4, lending_limit: 2}}", "teams.vision.lending_limit", "unknown key"),
    ("users: {alice: {gpus: 4, team: vision}}", "users.alice.team", "not declared under 'teams'"),
    ("users: {alice: 4}", "users.alice", "expected a mapping"),
    ("users: [alice]", "users", "expected a mapping of names"),
    ("groups: {}", "groups", "unknown key (known: teams, users, default_user)"),
    ("default_user: {gpus: 2, team: vision}", "default_user.team", "unknown key"),
])
def test_a_bad_file_is_one_error_naming_the_file_and_the_field(tmp_path, text, field, words):
    path = tmp_path / "q.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_quotas(path)
    assert err.value.field == field and err.value.source == str(path)
    assert str(err.value).startswith(f"{path} field '{field}': ") and words in str(err.value)
    assert "\n" not in str(err.value)


def test_unreadable_or_not_yaml_files_name_the_file(tmp_path):
    with pytest.raises(InputError, match="quota file not found"):
        load_quotas(tmp_path / "missing.yaml")
    path = tmp_path / "broken.yaml"
    path.write_text("teams: {vision: [\n")
    with pytest.raises(InputError, match="not YAML") as err:
        load_quotas(path)
    assert err.value.source == str(path)


def test_an_empty_file_declares_no_quotas_and_the_data_is_read_only():
    q = quotas_from_mapping(None)
    assert q == Quotas() and q.user_entry("anyone") is None
    with pytest.raises(TypeError):
        q.teams["x"] = QuotaEntry(1)  # type: ignore[index]
