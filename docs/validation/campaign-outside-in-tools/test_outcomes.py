# a user's steps that end through pytest's own outcomes, as a library's check may: skip and fail
import pytest


def test_skips(gpubench):
    def step():
        pytest.skip("this step needs a GPU")
    gpubench.measure(step, name="user/skips", params={}, work={"samples": 1})


def test_fails(gpubench):
    def step():
        pytest.fail("the step's own check failed")
    gpubench.measure(step, name="user/fails", params={}, work={"samples": 1})
