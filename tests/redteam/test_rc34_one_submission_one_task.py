"""One submission id, one content. `auger submit --submission-id X` with a different prompt or mode once
printed the first task and exited 0, dropping the new content without a word (the HTTP route has
always answered 409). Now a repeat with the same content prints the first task, and one with other
content fails, naming the task the id was used for, and queues nothing."""

from __future__ import annotations

from tests.support.fleet import make_repo, submit, task_model, task_rows


def test_a_reused_submission_id_with_other_content_fails_and_queues_nothing(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        first = submit(home, postgres_url, model, repo, "task one", "--submission-id", "ci-7")
        same = submit(home, postgres_url, model, repo, "task one", "--submission-id", "ci-7")
        other_prompt = submit(home, postgres_url, model, repo, "task two", "--submission-id", "ci-7", check=False)
        other_mode = submit(home, postgres_url, model, repo, "task one", "--submission-id", "ci-7", "--mode", "plan",
                            check=False)
        other_label = submit(home, postgres_url, model, repo, "task one", "--submission-id", "ci-7", "--label", "x",
                             check=False)
    task_id = first.stdout.strip()
    assert same.returncode == 0 and same.stdout.strip() == task_id
    for done in (other_prompt, other_mode, other_label):
        assert done.returncode != 0 and done.stdout == ""
        assert f"submission id 'ci-7' was already used for another task ({task_id})" in done.stderr, done.stderr
    assert [row[0] for row in task_rows(postgres_url)] == [task_id]
