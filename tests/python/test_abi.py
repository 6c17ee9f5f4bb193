"""The ctypes structs of the package (python/mirrored/_lib.py) against
include/mirrored.h as a C compiler lays it out: every public struct of the
header has its ctypes class, with the same fields in the same order, at the
same offsets, of the same sizes, and the same sizeof. The header's fields
are read from its text, so a field added to one side only fails here."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

from mirrored import _lib

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                      "mirrored.h")
# struct of the header -> its ctypes class
CLASSES = {
    "mirrored_error": _lib.CError,
    "mirrored_array": _lib.Array,
    "mirrored_model_info": _lib.ModelInfo,
    "mirrored_step_logs": _lib.StepLogs,
    "mirrored_epoch_logs": _lib.EpochLogs,
    "mirrored_fit_options": _lib.FitOptions,
    "mirrored_fit_result": _lib.FitResult,
}


def header_structs(text):
    """{struct name: [field names in order]} of the header's
    `typedef struct NAME { ... } NAME;` definitions."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    out = {}
    for name, body in re.findall(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\1\s*;", text, re.S):
        fields = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            # "const mirrored_array *x, *y" -> x, y; "int64_t shape[N]" -> shape
            first, *rest = decl.split(",")
            for d in [first] + rest:
                m = re.search(r"\**\s*(\w+)\s*(\[[^\]]*\])?\s*$", d)
                assert m, f"{name}: cannot read the declaration {decl!r}"
                fields.append(m.group(1))
        out[name] = fields
    return out


def c_layout(structs, tmp_path):
    """{struct: (sizeof, [(field, offset, size)])} from a C compiler."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc) to lay out mirrored.h")
    lines = ["#include <stddef.h>", "#include <stdio.h>", f'#include "{os.path.abspath(HEADER)}"',
             "int main(void) {"]
    for name, fields in structs.items():
        lines.append(f'    printf("%s %zu\\n", "{name}", sizeof({name}));')
        for f in fields:
            lines.append(f'    printf("%s.%s %zu %zu\\n", "{name}", "{f}", offsetof({name}, {f}), '
                         f'sizeof((({name} *)0)->{f}));')
    lines += ["    return 0;", "}"]
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-o", str(exe), str(src)], check=True)
    out = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        parts = line.split()
        if "." not in parts[0]:
            out[parts[0]] = (int(parts[1]), [])
        else:
            struct, field = parts[0].split(".")
            out[struct][1].append((field, int(parts[1]), int(parts[2])))
    return out


def ctypes_layout(cls):
    return (ctypes.sizeof(cls),
            [(f[0], getattr(cls, f[0]).offset, getattr(cls, f[0]).size) for f in cls._fields_])


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    with open(HEADER) as f:
        structs = header_structs(f.read())
    return structs, c_layout(structs, tmp_path_factory.mktemp("abi"))


def test_every_struct_has_a_ctypes_class(layouts):
    structs, _ = layouts
    assert sorted(structs) == sorted(CLASSES)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_struct_layout(layouts, name):
    _, c = layouts
    assert ctypes_layout(CLASSES[name]) == c[name]


def test_header_reader_sees_a_field_added(layouts):
    """The check can fail: a field the ctypes class lacks, a name out of order."""
    structs, c = layouts
    text = open(HEADER).read().replace("    int64_t max_steps;",
                                       "    int64_t max_steps;\n    int extra;")
    assert header_structs(text)["mirrored_fit_options"] == \
        structs["mirrored_fit_options"][:-5] + ["max_steps", "extra"] + \
        structs["mirrored_fit_options"][-4:]

    class Short(ctypes.Structure):
        _fields_ = _lib.FitOptions._fields_[1:]
    assert ctypes_layout(Short) != c["mirrored_fit_options"]


def test_fit_options_version():
    """The package fills in its layout's version; the library's default agrees."""
    assert _lib.lib.mirrored_fit_options_default().struct_version == _lib.FIT_OPTIONS_VERSION
