"""End to end: `auger exec` fixes a real bug in a small multi-file project.

The scripted model only moves on when the previous tool's real output reached it
(each step asserts on the request it received), so the test proves the loop:
run tests → grep → read → edit → run tests → green.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply, ToolCall

PY = sys.executable
TEST_CMD = f"{PY} -m unittest discover -s tests -q"


def make_shop(root):
    files = {
        "shop/__init__.py": "",
        "shop/pricing.py": """\
            def apply_discount(amount, percent):
                \"\"\"Price after a percentage discount (percent is 0-100).\"\"\"
                return amount - amount * percent
            """,
        "shop/cart.py": """\
            from shop.pricing import apply_discount


            class Cart:
                def __init__(self, discount=0):
                    self.items = []
                    self.discount = discount

                def add(self, name, price, qty=1):
                    self.items.append((name, price, qty))

                def total(self):
                    subtotal = sum(price * qty for _, price, qty in self.items)
                    return apply_discount(subtotal, self.discount)
            """,
        "tests/__init__.py": "",
        "tests/test_cart.py": """\
            import unittest

            from shop.cart import Cart


            class CartTest(unittest.TestCase):
                def test_discounted_total(self):
                    cart = Cart(discount=10)
                    cart.add("book", 50, qty=4)
                    self.assertEqual(cart.total(), 180)

                def test_no_discount(self):
                    cart = Cart()
                    cart.add("pen", 2, qty=3)
                    self.assertEqual(cart.total(), 6)
            """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def last_tool_output(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]


def test_scripted_model_fixes_a_failing_test(project, server, auger_home):
    make_shop(project)
    assert subprocess.run(TEST_CMD.split(), cwd=project, capture_output=True).returncode != 0

    def after_failing_run(body):
        out = last_tool_output(body)
        assert out.startswith("Exit code: 1") and "FAILED" in out and "AssertionError" in out
        return Reply(text="The discounted total is wrong; finding the discount code.",
                     tool_calls=[ToolCall("grep", {"pattern": r"def apply_discount", "path": "."})])

    def after_grep(body):
        assert "shop/pricing.py:1:def apply_discount(amount, percent):" in last_tool_output(body)
        return Reply(tool_calls=[ToolCall("read_file", {"path": "shop/pricing.py"})])

    def after_read(body):
        out = last_tool_output(body)
        assert "     3\t    return amount - amount * percent" in out
        return Reply(tool_calls=[ToolCall("edit_file", {"path": "shop/pricing.py",
                                                        "old_string": "return amount - amount * percent",
                                                        "new_string": "return amount - amount * percent / 100"})])

    def after_edit(body):
        assert "Error" not in last_tool_output(body)
        return Reply(tool_calls=[ToolCall("shell", {"command": TEST_CMD})])

    def after_green_run(body):
        out = last_tool_output(body)
        assert out.startswith("Exit code: 0") and "OK" in out
        return Reply(text="Fixed: apply_discount treated percent as a fraction; it now divides by 100. "
                          "Tests pass.")

    server.add(Reply(tool_calls=[ToolCall("shell", {"command": TEST_CMD})]),
               after_failing_run, after_grep, after_read, after_edit, after_green_run)
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m",
                       "The cart total is wrong when a discount applies. Fix it.", home=auger_home, cwd=project)
    assert not server.errors, server.errors
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Fixed: apply_discount")
    assert "percent / 100" in (project / "shop/pricing.py").read_text()
    rerun = subprocess.run(TEST_CMD.split(), cwd=project, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert len(server.chat_requests) == 6
