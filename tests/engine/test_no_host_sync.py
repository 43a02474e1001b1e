"""No host sync inside the per-step code of client training.

On a GPU, ``.item()``, ``.cpu()``, ``.tolist()``, ``.numpy()``, ``float(t)``, ``int(t)`` or
``bool(t)`` on a device tensor makes the host wait for the device: once per step that serialises
``cuda:all`` and starves the GPU. A CPU run cannot show the cost, so this reads the source: every
such call in the per-step functions of training/client.py and training/dispatch.py must be in ALLOWED, with why.
"""

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "fedweb_engine"

# (file, function) whose bodies run per step, per group or per client of a round.
PER_STEP = {
    "training/client.py": ["sgd_update_", "VectorTrainer._step_fn",
                  "VectorTrainer.gradients", "VectorTrainer._view_gradients", "VectorTrainer.train",
                  "VectorTrainer._local_sgd", "sgd_views_update_",
                  "SequentialTrainer.train", "SequentialTrainer._local_sgd"],
    "training/losses.py": ["task_loss", "weighted_task_loss", "batch_weights", "LossScaler.unscale_and_check"],
    "training/dispatch.py": ["train_plans", "_uplink", "_collect_rows"],
    "training/compiled.py": ["CompiledSteps.__call__"],
    "training/compile_policy.py": ["StepCompiler.start_group", "StepCompiler.run"],
}  # fmt: skip
SYNCING_METHODS = {"item", "cpu", "tolist", "numpy"}
SYNCING_BUILTINS = {"float", "int", "bool"}

# (file, function, source line stripped) -> why it does not wait for a device.
ALLOWED = {
    ("training/client.py", "SequentialTrainer.train", "steps_host = plan.active.sum(dim=1).to(torch.int64).tolist()"):
        "the plan's tensors are host tensors, read once per group",
    ("training/client.py", "SequentialTrainer.train", "counts = plan.mask.sum(dim=2).to(torch.int64).tolist()"):
        "the plan's tensors are host tensors, read once per group",
    ("training/client.py", "VectorTrainer.train", "self.compiler.end_group(timing, float(plan.active.sum()))"):
        "the plan's tensors are host tensors; only while compute.compile auto times its first groups",
}  # fmt: skip


def _functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item


def _syncing_calls(function: ast.FunctionDef):
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in SYNCING_METHODS and not node.args:
            yield node
        elif isinstance(f, ast.Name) and f.id in SYNCING_BUILTINS and node.args:
            if not isinstance(node.args[0], ast.Constant):  # float("inf") and the like are fine
                yield node


def offences(file: str, source: str) -> list[tuple[str, str, str]]:
    """(file, function, line) of every syncing call in the per-step functions of ``source``."""
    lines = source.splitlines()
    found = []
    for name, function in _functions(ast.parse(source)):
        if name in PER_STEP[file]:
            found += [(file, name, lines[call.lineno - 1].strip()) for call in _syncing_calls(function)]
    return found


@pytest.mark.parametrize("file", sorted(PER_STEP))
def test_the_per_step_functions_do_not_wait_for_the_device(file):
    source = (ENGINE / file).read_text()
    names = {name for name, _ in _functions(ast.parse(source))}
    assert set(PER_STEP[file]) <= names, "a per-step function was renamed: update PER_STEP"

    found = offences(file, source)

    assert [o for o in found if o not in ALLOWED] == []
    assert {a for a in ALLOWED if a[0] == file} <= set(found), "an allowed line is gone: drop it from ALLOWED"


def test_the_check_catches_each_kind_of_sync():
    source = "\n".join([
        "def train_plans(x):",
        "    a = x.item()", "    b = float(x)", "    c = int(x.sum())", "    d = bool(x)", "    e = x.cpu()",
        "    f = float('inf')",
    ])  # fmt: skip
    assert [line for _, _, line in offences("training/dispatch.py", source)] == [
        "a = x.item()", "b = float(x)", "c = int(x.sum())", "d = bool(x)", "e = x.cpu()",
    ]  # fmt: skip
