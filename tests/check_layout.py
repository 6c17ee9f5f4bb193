#!/usr/bin/env python3
"""check_layout.py: the layout rules of docs/architecture.md, checked.

1. Includes: every quoted #include is a root-relative path that exists,
   and points down the layers, never up:
       api | launch -> session -> strategies -> backends -> models | collectives -> runtime
   (api and launch are siblings: neither includes the other; launch/mirrored_export.c,
   a client of the public API, includes only include/)
   (include/, the public header, includes nothing of ours; any folder may
   include it)
   (models and collectives do not include each other).
2. Private headers: a backend's folder (backends/<kind>/) is included only
   from that folder and from tests/; an *_impl.h only from its own folder
   (and tests/), except runtime/dmem_impl.h, which the implementations of
   device memory use: the backends, the CPU communicators, and the
   benchmark that drives them on host buffers.
3. References: every repository file a comment or a document names
   (a path such as models/layer.h, or a bare name such as layer.c) exists.
4. No include circle: no header reaches itself through its #includes.
5. Short functions: no function of the production code (all but tests/
   and bench/) is longer than MAX_FUNCTION_LINES lines; a new feature is
   a new function or a stage beside the others, not more lines in one.
6. The Python package: python/meson.build installs every file of
   python/mirrored (a module it leaves out is missing from the wheel).

Prints one line per violation and exits 1, or prints a summary and exits 0.
Usage: check_layout.py [SOURCE_ROOT]
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..'))

# folder -> folders its files may include from (besides itself)
ALLOWED = {
    'runtime': set(),
    'collectives': {'runtime'},
    'models': {'runtime'},
    'backends': {'runtime', 'collectives', 'models'},
    'strategies': {'runtime', 'collectives', 'models', 'backends'},
    # one run around the strategy, under both faces
    'session': {'runtime', 'collectives', 'models', 'backends', 'strategies'},
    # the two faces, siblings: the executables and the public C API
    # (libmirrored); neither includes the other
    'launch': {'runtime', 'collectives', 'models', 'backends', 'strategies', 'session', 'include'},
    'api': {'runtime', 'collectives', 'models', 'backends', 'strategies', 'session', 'include'},
    'bench': {'runtime', 'collectives', 'models', 'backends', 'strategies', 'session', 'launch',
              'include'},
    'tests': {'runtime', 'collectives', 'models', 'backends', 'strategies', 'session', 'launch',
              'include'},
    'examples': {'include'},
    # the public header (include/mirrored.h) includes nothing of ours
    'include': set(),
}
# files held to fewer folders than their own folder's rule: a client of the
# public API alone, as examples/ are
FILE_ALLOWED = {'launch/mirrored_export.c': {'include'}}
# private headers opened to more than their own folder
SHARED_PRIVATE = {'runtime/dmem_impl.h': {'collectives', 'backends', 'bench'}}
# names a comment may give that are not ours: the libraries' headers and
# sources, and placeholders in usage examples
EXTERNAL = {'cublas_v2.h', 'cuda_runtime_api.h', 'cudnn.h', 'nccl.h', 'mpi.h', 'cblas.h', 'hdf5.h',
            'driver_types.h', 'cudnn_cnn.h', 'cudnn_ops.h', 'crt/host_defines.h',
            'device_launch_parameters.h', 'cuda_runtime.h', 'math.h', 'check.h',
            'Random123/philox.h', 'init.cc', 'keras/src/optimizers/adam.py',
            'keras/src/optimizers/sgd.py', 'model.cfg', 'NAME.cfg', 'models/configs/NAME.cfg'}


def placeholder(ref):
    """A made-up name in a recipe: the layer 'foo' of docs/architecture.md."""
    return re.search(r'(^|[/_])foo([_.]|$)', ref) is not None
SOURCE_EXT = ('.c', '.h', '.cu', '.cc')
DOC_EXT = ('.md',)
REF_EXT = r'(?:c|h|cu|cc|md|py|sh|cfg|in)'


def tracked():
    out = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard'], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return sorted(set(out.stdout.split()))
    files = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(('.', 'build'))]
        files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return sorted(files)


def top(path):
    return path.split('/', 1)[0]


def check_includes(files, errors):
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    exists = set(files)
    for f in files:
        if not f.endswith(SOURCE_EXT) or top(f) not in ALLOWED:
            continue
        text = open(os.path.join(ROOT, f), errors='replace').read()
        for m in inc.finditer(text):
            target = m.group(1)
            line = text.count('\n', 0, m.start()) + 1
            where = f'{f}:{line}: #include "{target}"'
            if target not in exists:
                # Random123 and the like come from the system, never quoted
                errors.append(f'{where}: not a root-relative path of the repository')
                continue
            src, dst = top(f), top(target)
            if f in FILE_ALLOWED and dst not in FILE_ALLOWED[f]:
                errors.append(f'{where}: {f} is a client of the public API: it may include only '
                              f'from {", ".join(sorted(FILE_ALLOWED[f]))}/')
            elif dst != src and dst not in ALLOWED[src]:
                errors.append(f'{where}: {src}/ may not include from {dst}/ (layers point down)')
            parts = target.split('/')
            if parts[0] == 'backends' and len(parts) > 2:
                kind_dir = '/'.join(parts[:2]) + '/'
                if not f.startswith(kind_dir) and src != 'tests':
                    errors.append(f'{where}: {kind_dir} is private to its backend')
            if target.endswith('_impl.h'):
                own = os.path.dirname(target) + '/'
                extra = SHARED_PRIVATE.get(target, set())
                if not f.startswith(own) and src != 'tests' and src not in extra:
                    errors.append(f'{where}: an *_impl.h is private to {own}')


def check_references(files, errors):
    exists = set(files)
    basenames = {os.path.basename(f) for f in files}
    # generated from a .in file of the same name
    basenames |= {b[:-3] for b in basenames if b.endswith('.in')}
    path_ref = re.compile(r'(?<![\w./-])((?:[\w-]+/)+[\w.-]+\.' + REF_EXT + r')\b')
    bare_ref = re.compile(r'(?<![\w./-])([a-z][\w-]*\.' + REF_EXT + r')\b')
    comment = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
    for f in files:
        if f.endswith(SOURCE_EXT):
            text = open(os.path.join(ROOT, f), errors='replace').read()
            chunks = [(m.start(), m.group(0)) for m in comment.finditer(text)]
        elif f.endswith(DOC_EXT) or f.endswith('meson.build'):
            text = open(os.path.join(ROOT, f), errors='replace').read()
            chunks = [(0, text)]
        else:
            continue
        for start, chunk in chunks:
            for m in path_ref.finditer(chunk):
                ref = m.group(1)
                if ref.startswith(('/', 'http')) or '://' in ref or ref in EXTERNAL or placeholder(ref):
                    continue
                cand = [ref, os.path.normpath(os.path.join(os.path.dirname(f), ref))]
                if ref.startswith('../'):
                    cand = [os.path.normpath(os.path.join(os.path.dirname(f), ref))]
                if not any(c in exists or c + '.in' in exists or os.path.isdir(os.path.join(ROOT, c))
                           for c in cand):
                    line = text.count('\n', 0, start + m.start()) + 1
                    errors.append(f'{f}:{line}: names {ref}, which is not in the repository')
            for m in bare_ref.finditer(chunk):
                ref = m.group(1)
                if ref not in basenames and ref not in EXTERNAL and not placeholder(ref):
                    line = text.count('\n', 0, start + m.start()) + 1
                    errors.append(f'{f}:{line}: names {ref}, which is not in the repository')


def check_include_circles(files, errors):
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    exists = set(files)
    graph = {}
    for f in files:
        if f.endswith(SOURCE_EXT) and top(f) in ALLOWED:
            text = open(os.path.join(ROOT, f), errors='replace').read()
            graph[f] = [t for t in inc.findall(text) if t in exists and t.endswith('.h')]
    state = {}  # 1: on the current path, 2: done

    def visit(f, path):
        state[f] = 1
        for t in graph.get(f, []):
            if state.get(t) == 1:
                cycle = path[path.index(t):] + [t]
                errors.append(f'{t}: include circle: {" -> ".join(cycle)}')
            elif t not in state:
                visit(t, path + [t])
        state[f] = 2

    for f in sorted(graph):
        if f not in state:
            visit(f, [f])


MAX_FUNCTION_LINES = 150


def function_lengths(text):
    """(first line, lines, name) of each top-level brace block that follows a
    parameter list: the functions of a C, C++ or CUDA file."""
    code = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
    code = re.sub(r'//[^\n]*', '', code)
    code = re.sub(r'"(\\.|[^"\\\n])*"', '""', code)
    code = re.sub(r"'(\\.|[^'\\\n])*'", "''", code)
    depth, start, head, out = 0, None, '', []
    for i, line in enumerate(code.split('\n')):
        for ch in line:
            if ch == '{':
                if depth == 0:
                    m = re.search(r'(\w+)\s*\([^;{}]*\)[\s\w]*$', head)
                    start = (i, m.group(1)) if m and '=' not in head.split('(')[0] else None
                    head = ''
                depth += 1
            elif ch == '}':
                depth -= 1
                if depth == 0 and start is not None:
                    out.append((start[0] + 1, i - start[0] + 1, start[1]))
                    start = None
            elif depth == 0:
                head = (head + ch)[-400:]
            if depth == 0 and ch == ';':
                head = ''
        if depth == 0:
            head += ' '
    return out


def check_function_lengths(files, errors):
    for f in files:
        if not f.endswith(SOURCE_EXT) or top(f) in ('tests', 'bench') or top(f) not in ALLOWED:
            continue
        text = open(os.path.join(ROOT, f), errors='replace').read()
        for line, n, name in function_lengths(text):
            if n > MAX_FUNCTION_LINES:
                errors.append(f'{f}:{line}: {name} is {n} lines, over {MAX_FUNCTION_LINES}: split it')


def check_python_package(files, errors):
    """Every file of python/mirrored is one python/meson.build installs: a
    module left out of the list is missing from the wheel (pip install .)
    while the tests, which import the source folder, pass."""
    listed = set(re.findall(r"'mirrored/([^']+)'",
                            open(os.path.join(ROOT, 'python', 'meson.build')).read()))
    present = {f[len('python/mirrored/'):] for f in files if f.startswith('python/mirrored/')
               and '/' not in f[len('python/mirrored/'):]}
    for name in sorted(present - listed):
        errors.append(f'python/mirrored/{name}: not in python/meson.build\'s py_sources (the '
                      f'wheel would lack it)')
    for name in sorted(listed - present):
        errors.append(f'python/meson.build: mirrored/{name} is not in python/mirrored')


def main():
    files = tracked()
    errors = []
    check_python_package(files, errors)
    check_includes(files, errors)
    check_references(files, errors)
    check_include_circles(files, errors)
    check_function_lengths(files, errors)
    for e in errors:
        print(e)
    n_src = sum(f.endswith(SOURCE_EXT) for f in files)
    if errors:
        print(f'check_layout: {len(errors)} violation(s)')
        return 1
    print(f'check_layout: {n_src} source files: includes point down, private headers stay '
          f'private, no include circle, no function over {MAX_FUNCTION_LINES} lines, every file named '
          f'in a comment or a document exists')
    return 0


if __name__ == '__main__':
    sys.exit(main())
