"""The redactor on its own (auger/secrets): one real-looking sample per format of the detector table, texts
that must stay as they are (commit ids, UUIDs, code that names a secret without holding one), the forms a
known value is found in, streams cut anywhere, putting values back, numbering across a restart, and the
last check on a request body."""

from __future__ import annotations

import base64
import json

import pytest

from auger.secrets.known import KnownSecret, known_secrets
from auger.secrets.numbering import Numbering, load_key
from auger.secrets.outgoing import OutgoingCheck
from auger.secrets.redact import Redactor, Unrestorable
from auger.secrets.settings import DEFAULT_ENV_PATTERNS

PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi8Yz1ZQ2Lk6Fq1bXYpDs9oZGZW\n"
       "q0V3M1k4RkF4YlN3eE1zZ2d3dE5tS1B6Rm5Wb0ZwRzdQZzNxY2RrTmJzUWpX\n-----END RSA PRIVATE KEY-----")

SAMPLES = [  # (kind, secret, the text it is in)
    ("private-key", PEM, f"key file:\n{PEM}\nend"),
    ("private-key", PEM.replace("\n", "\\n"), '{"private_key": "' + PEM.replace("\n", "\\n") + '", "x": 1}'),
    ("anthropic-key", "sk-ant-api03-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAB7cD0eF3gH6iJ9kL2mN5oP8qR1sT4uV7wX0yZ3a" + "AA",
     "ANTHROPIC = sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAB7cD0eF3gH6iJ9kL2mN5oP8qR1sT4uV7wX0yZ3aAA ok"),
    ("openai-key", "sk-proj-Xk2Lm9Np4Qr7St1Uv5Wx8Yz3Ab6Cd0Ef2Gh5Ij8Kl1Mn4T3BlbkFJOp7Qr0St3Uv6Wx9Yz2Ab5Cd8",
     "export OPENAI=sk-proj-Xk2Lm9Np4Qr7St1Uv5Wx8Yz3Ab6Cd0Ef2Gh5Ij8Kl1Mn4T3BlbkFJOp7Qr0St3Uv6Wx9Yz2Ab5Cd8"),
    ("openai-key", "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", "key 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"),
    ("github-token", "ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m", "token: ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m"),
    ("github-token", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "oauth gho_16C7e42F292c6912E7710c838347Ae178B4a."),
    ("github-token", "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcde",
     "pat=github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcde"),
    ("gitlab-token", "glpat-x9Fz2kQ7mN4pR8sT1vW6", "GITLAB glpat-x9Fz2kQ7mN4pR8sT1vW6"),
    ("aws-access-key-id", "AKIAIOSFODNN7EXAMPLE", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE"),
    ("aws-secret-key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws-secret-key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "User,Key\nbuild,AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"),
    ("slack-token", "xoxb-2486721543-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "SLACK xoxb-2486721543-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    ("slack-webhook", "https://hooks.slack.com/services/T0ABCDEFG/B0HIJKLMN/abcdefghijklmnopqrstuvwx",
     "post to https://hooks.slack.com/services/T0ABCDEFG/B0HIJKLMN/abcdefghijklmnopqrstuvwx now"),
    ("stripe-key", "sk_live_4eC39HqLyjWDarjtT1zdp7dcAb", "stripe.api_key = sk_live_4eC39HqLyjWDarjtT1zdp7dcAb"),
    ("stripe-key", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "STRIPE_WEBHOOK whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    ("google-api-key", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    ("google-oauth-secret", "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", "client_secret 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"),
    ("jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
            "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
     "Authorization header was eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
     "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    ("npm-token", "npm_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", "//registry.npmjs.org/:_authToken=npm_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"),
    ("pypi-token", "pypi-AgEIcHlwaS5vcmcCJGE4ZjM1ZjkzLWE5NmQtNGQ3Ni1iYzQ3LTY5ZjNhZmY1ZTg1NgACKlszLCJmMWU4",
     "password = pypi-AgEIcHlwaS5vcmcCJGE4ZjM1ZjkzLWE5NmQtNGQ3Ni1iYzQ3LTY5ZjNhZmY1ZTg1NgACKlszLCJmMWU4"),
    ("huggingface-token", "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "HF hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
    ("sendgrid-key", "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",
     "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"),
    ("twilio-key", "SK0123456789abcdef0123456789abcdef", "twilio SK0123456789abcdef0123456789abcdef"),
    ("square-token", "sq0csp-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg", "sq0csp-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg"),
    ("shopify-token", "shpat_0123456789abcdef0123456789abcdef", "shop shpat_0123456789abcdef0123456789abcdef"),
    ("digitalocean-token", "dop_v1_" + "0123456789abcdef" * 4, "DO dop_v1_" + "0123456789abcdef" * 4),
    ("databricks-token", "dapi0123456789abcdef0123456789abcdef", "host tok dapi0123456789abcdef0123456789abcdef"),
    ("azure-storage-key", "A" * 20 + "bC1+dE2/fG3" * 6 + "==",
     "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + "A" * 20 + "bC1+dE2/fG3" * 6 + "==;"),
    ("url-password", "S3cr3t-Pa55", "DATABASE_URL=postgres://app:S3cr3t-Pa55@db.internal:5432/app"),
    ("authorization", "c2VjcmV0LXZhbHVlLTEyMzQ1Njc4OTA", "-H 'Authorization: Bearer c2VjcmV0LXZhbHVlLTEyMzQ1Njc4OTA'"),
    ("authorization", "YWRtaW46aHVudGVyMg==", "Authorization: Basic YWRtaW46aHVudGVyMg=="),
    ("secret-setting", "hunter2hunter2", 'db = connect(password="hunter2hunter2")'),
    ("secret-setting", "Zx81-qq0-Lm", '{"client_secret": "Zx81-qq0-Lm"}'),
    ("secret-setting", "Tr0ub4dor&3x", "[auth]\npassword = Tr0ub4dor&3x\n"),
    ("secret-variable", "s3cret-db-pass-99", "HOME=/root\nDB_PASS_TOKEN=s3cret-db-pass-99\nPATH=/bin"),
    ("secret-variable", "Q9w8E7r6T5y4", "HOME=/root\0MY_API_KEY=Q9w8E7r6T5y4\0SHELL=/bin/sh\0"),
]

UNTOUCHED = [
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 (HEAD -> main)",
    "id = 123e4567-e89b-12d3-a456-426614174000",
    "token = get_token(user)",
    'password = os.environ["DB_PASSWORD"]',
    "api_key = settings.API_KEY",
    "SECRET_KEY=${SECRET_KEY}",
    "TOKEN_URL=https://example.com/oauth/token",
    "password: changeme",
    "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
    "the eyJ prefix starts a JWT; sk- starts an OpenAI key; AKIA starts an AWS key id",
    "https://user@example.com/path and git@github.com:org/repo.git",
    "sha256:" + "a" * 64,
]


def redactor(*known: KnownSecret, key: bytes = b"k" * 32, recorded=()) -> Redactor:
    return Redactor(known, Numbering(key, recorded), DEFAULT_ENV_PATTERNS)


@pytest.mark.parametrize(("kind", "secret", "text"), SAMPLES, ids=[f"{k}-{n}" for n, (k, _, _) in enumerate(SAMPLES)])
def test_each_format_is_found_and_replaced_by_its_marker(kind, secret, text):
    r = redactor()
    redaction = r.redact(text)
    assert secret not in redaction.text
    assert f"[secret:{kind}#1]" in redaction.text, redaction.text
    assert r.reveal(redaction.text, text) == text  # nothing else changed


@pytest.mark.parametrize("text", UNTOUCHED)
def test_texts_that_only_look_near_a_secret_are_left_alone(text):
    assert redactor().redact(text).text == text


def test_a_known_value_is_found_in_the_forms_commands_make_of_it():
    value = "Known-Value-8c1d2e3f4a"
    r = redactor(KnownSecret("env-deploy-token", value, "the value of $DEPLOY_TOKEN"))
    forms = {
        "as is": f"DEPLOY_TOKEN={value}",
        "folded": "\n".join(value[i:i + 5] for i in range(0, len(value), 5)),
        "spaced": " ".join(value),
        "reversed": value[::-1],
        "hex": value.encode().hex(),
        "HEX": value.encode().hex().upper(),
        "json": json.dumps({"v": value}),
    }
    for skip in range(3):
        encoded = base64.b64encode(b"#" * skip + value.encode() + b"\n").decode()
        forms[f"base64 at {skip}"] = "\n".join(encoded[i:i + 12] for i in range(0, len(encoded), 12))
    for name, text in forms.items():
        shown = r.redact(text).text
        assert "[secret:env-deploy-token" in shown, (name, shown)
        assert value not in shown.replace("\n", "").replace(" ", ""), name


def test_a_value_found_by_its_shape_is_known_in_every_form_from_then_on():
    token = "ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m"
    r = redactor()
    wrapped = base64.b64encode(token.encode()).decode()
    assert r.redact(wrapped).text == wrapped  # unseen: nothing tells a base64 blob holds it
    r.redact(f"token {token}")
    assert "[secret:github-token.base64#1]" in r.redact(wrapped).text


@pytest.mark.parametrize("shapes", [True, False])
def test_a_stream_cut_anywhere_never_shows_a_part_of_a_value(shapes):
    value = "Known-Value-8c1d2e3f4a"
    token = "ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m"
    text = f"start {value} middle {token} end\nnext line\n"
    for cut in range(1, len(text)):
        r = redactor(KnownSecret("env-x", value, "$X"))
        r.redact(token)  # learned, so a stream without shapes knows it too
        stream = r.stream(shapes=shapes)
        shown = stream.feed(text[:cut]).text + stream.feed(text[cut:]).text + stream.flush().text
        assert shown == "start [secret:env-x#1] middle [secret:github-token#1] end\nnext line\n", cut


def test_a_model_stream_holds_back_only_what_could_begin_a_known_value():
    r = redactor(KnownSecret("env-x", "Known-Value-8c1d2e3f4a", "$X"))
    stream = r.stream(shapes=False)
    assert stream.feed("Here is the plan").text == "Here is the plan"
    assert stream.feed(" Kno").text == " "
    assert stream.feed("wn-Value-8c1d2e3f4a done").text == "[secret:env-x#1] done"


def test_sessions_that_know_the_same_values_share_what_their_streams_hold_back_by():
    """What a stream holds back is decided by every prefix of every known value in its encodings: hundreds of
    strings per session, the same for a server's sessions (they know the same environment), so shared; a
    session that learned another value has its own."""
    known = KnownSecret("env-x", "Known-Value-8c1d2e3f4a", "$X")
    one, two = redactor(known), redactor(known)
    for r in (one, two):
        stream = r.stream(shapes=False)
        assert stream.feed("plan Kno").text == "plan "
        assert stream.feed("wn-Value-8c1d2e3f4a").text == "[secret:env-x#1]"
    assert one._known._prefixes is two._known._prefixes and "Known-Val" in one._known._prefixes
    two.redact("ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m")  # learned by this session only
    stream = two.stream(shapes=False)
    assert stream.feed("x ghp_R7x2Kq9").text == "x "
    assert stream.feed("LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m").text == "[secret:github-token#1]"
    assert "ghp_R7x2Kq9" in two._learned._prefixes and one._learned._prefixes is None


def test_reveal_puts_back_what_a_file_holds_and_refuses_any_other_marker():
    token = "ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m"
    r = redactor()
    file = f'KEY = "{token}"\nDOC = "[secret:jwt#3] is how auger writes a marker"\n'
    seen = r.redact(file).text
    assert seen == 'KEY = "[secret:github-token#1]"\nDOC = "[secret:jwt#3] is how auger writes a marker"\n'
    assert r.reveal(seen.replace("KEY", "TOKEN"), file) == file.replace("KEY", "TOKEN")  # a literal stays literal
    with pytest.raises(Unrestorable) as elsewhere:
        r.reveal('COPY = "[secret:github-token#1]"', "nothing secret here\n")
    assert elsewhere.value.made and "never written elsewhere" in elsewhere.value.explain("b.py")
    with pytest.raises(Unrestorable) as unknown:
        r.reveal('X = "[secret:github-token#2]"', file)
    assert not unknown.value.made


def test_numbers_are_kept_as_hmacs_and_given_again_after_a_restart(tmp_path):
    key = load_key(tmp_path)
    assert key is not None and load_key(tmp_path) == key
    assert (tmp_path / "secrets.key").stat().st_mode & 0o777 == 0o600
    first = redactor(key=key)
    first.redact("a ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m b gho_16C7e42F292c6912E7710c838347Ae178B4a")
    recorded = first.numbering.take_new()
    assert [(k, n) for k, n, _ in recorded] == [("github-token", 1), ("github-token", 2)]
    assert not any("ghp_" in d or "gho_" in d for _, _, d in recorded)
    again = redactor(key=key, recorded=recorded)
    assert again.redact("gho_16C7e42F292c6912E7710c838347Ae178B4a").text == "[secret:github-token#2]"
    lost = redactor(key=b"another key, the first one lost", recorded=recorded)
    assert lost.redact("gho_16C7e42F292c6912E7710c838347Ae178B4a").text == "[secret:github-token#3]"


def test_known_values_come_from_provider_keys_mcp_credentials_and_secret_variables():
    from tests.support.harness import make_config

    config = make_config()
    config.tables["mcp_servers"] = {"tracker": {"url": "https://mcp.test/mcp", "headers": {
        "Authorization": "Bearer tracker-credential-123", "X-Team": "core-team-name"},
        "env": {"NODE_ENV": "production", "SERVICE_API_KEY": "service-key-value-1"}}}
    env = {"OPENAI_API_KEY": "sk-openai-value-000", "GITHUB_TOKEN": "gh-token-value-22", "HOME": "/home/someone",
           "SHORT_TOKEN": "short", "EDITOR": "vim-with-a-long-name"}
    known = {(s.kind, s.value) for s in known_secrets(config, env, ["OPENAI_API_KEY"])}
    assert known == {("env-openai-api-key", "sk-openai-value-000"), ("env-github-token", "gh-token-value-22"),
                     ("mcp-tracker", "tracker-credential-123"), ("mcp-tracker", "service-key-value-1")}


def test_the_last_check_names_the_variable_never_the_value():
    value = "Known-Value-8c1d2e3f4a"
    check = OutgoingCheck([KnownSecret("env-deploy-token", value, "the value of $DEPLOY_TOKEN")])
    assert check(json.dumps({"messages": [{"content": "hello"}]})) is None
    for body in (json.dumps({"content": f"x {value}"}), json.dumps({"content": value.encode().hex()})):
        refusal = check(body)
        assert refusal is not None and "$DEPLOY_TOKEN" in refusal and value not in refusal
