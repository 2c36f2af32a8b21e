# two cases timed through the gpubench fixture: one fails (its callable raises), one passes
import pytest


@pytest.mark.parametrize("n", [1, 2])
def test_step(gpubench, n):
    def step():
        if n == 1:
            raise RuntimeError("boom: a user's step that fails")
        return sum(range(1000))
    gpubench.measure(step, name=f"user/step{n}", params={"n": n}, work={"samples": 1})
