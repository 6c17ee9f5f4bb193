#!/usr/bin/env python3
"""structure.py: the structure drawing, which source file calls which.

From a build's object files (`nm` on each production object: runtime/,
collectives/, models/, backends/, strategies/, session/, api/, launch/;
not tests/, bench/, examples/), a file-level graph: file A -> file B when
A's object references a global symbol that B's object defines. Two files
that reach each other directly form a circle (a two-file knot, usually a
module split in the wrong place); longer cycles are the strongly connected
components of more than two files, printed with one cycle through each.

Objects are named by their source through the build's
compile_commands.json; the CUDA kernels' objects (a generator's outputs,
not in that file) by the .cu file of the same name. A source compiled into
several targets (launch/cli.c) counts once.

Usage: structure.py BUILD_DIR [--dot OUT] [--max-circles N]
Prints the circles and cycles and exits 0; with --max-circles N, exits 1
when there are more than N two-file circles. --dot OUT writes the graph
in Graphviz's DOT format, circles in red."""
import argparse
import glob
import json
import os
import subprocess
import sys

PRODUCTION = ('runtime', 'collectives', 'models', 'backends', 'strategies', 'session', 'api',
              'launch')
# nm's letters for a symbol an object defines: functions (text, weak,
# indirect function: the AVX2 clones) and data (data, bss, read-only,
# common, small data); 'U' is one it references
FUNCTIONS = set('TWi')
DEFINED = FUNCTIONS | set('DBRCVGS')


def source_root(build):
    info = os.path.join(build, 'meson-info', 'meson-info.json')
    if os.path.exists(info):
        with open(info) as f:
            return json.load(f)['directories']['source']
    return os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def objects(build, src):
    """{object path: source path relative to src} for the production code."""
    found = {}
    with open(os.path.join(build, 'compile_commands.json')) as f:
        for entry in json.load(f):
            path = os.path.normpath(os.path.join(entry['directory'], entry['file']))
            if path.startswith(os.path.abspath(build) + os.sep):
                # a generated source (backends/registry.c from registry.c.in):
                # named by its place in the build tree
                rel = os.path.relpath(path, os.path.abspath(build))
            else:
                rel = os.path.relpath(path, src)
            found[os.path.normpath(os.path.join(entry['directory'], entry['output']))] = rel
    # generator outputs (the CUDA kernels, X_cuda.cu -> X_cuda.o)
    cu = {}
    for top in PRODUCTION:
        for path in glob.glob(os.path.join(src, top, '**', '*.cu'), recursive=True):
            cu.setdefault(os.path.splitext(os.path.basename(path))[0], []).append(
                os.path.relpath(path, src))
    for obj in glob.glob(os.path.join(os.path.abspath(build), '**', '*.o'), recursive=True):
        stem = os.path.splitext(os.path.basename(obj))[0]
        if obj not in found and len(cu.get(stem, [])) == 1:
            found[obj] = cu[stem][0]
    chosen = {}
    for obj, rel in sorted(found.items()):
        if rel.split('/', 1)[0] in PRODUCTION and rel not in chosen.values() and os.path.exists(obj):
            chosen[obj] = rel
    return chosen


def symbols(obj):
    """({defined global symbol: is a function}, {referenced symbols}) of one object."""
    out = subprocess.run(['nm', '--no-sort', obj], capture_output=True, text=True, check=True)
    defined, used = {}, set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == 'U':
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in DEFINED:
            defined[parts[2]] = parts[1] in FUNCTIONS
    return defined, used


def graph(objs):
    """({file: {file whose functions it calls}}, {file: {file whose data it names}})."""
    definer, uses = {}, {}
    for obj, rel in objs.items():
        defined, used = symbols(obj)
        uses[rel] = used
        for name, function in defined.items():
            definer.setdefault(name, set()).add((rel, function))
    calls = {rel: set() for rel in uses}
    tables = {rel: set() for rel in uses}
    for rel, used in uses.items():
        for name in used:
            for other, function in definer.get(name, ()):
                if other != rel:
                    (calls if function else tables)[rel].add(other)
    return calls, tables


def circles(edges):
    return sorted((a, b) for a in edges for b in edges[a] if a < b and a in edges.get(b, ()))


def components(edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def cycle_through(edges, comp):
    """One shortest cycle through the component's first file (breadth first)."""
    members, start = set(comp), comp[0]
    prev, queue = {start: None}, [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(edges[node] & members):
            if nxt == start:
                path = [node]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return comp


def write_dot(calls, tables, pairs, path):
    """Calls as solid arrows, table references dashed, circles in red."""
    knot = {p for pair in pairs for p in pair}
    with open(path, 'w') as f:
        f.write('digraph structure {\n  rankdir=LR;\n  node [shape=box, fontsize=10];\n')
        for top in PRODUCTION:
            files = sorted(r for r in calls if r.split('/', 1)[0] == top)
            if files:
                f.write('  subgraph "cluster_%s" {\n    label="%s/";\n' % (top, top))
                for rel in files:
                    f.write('    "%s"%s;\n' % (rel, ' [color=red]' if rel in knot else ''))
                f.write('  }\n')
        for a in sorted(calls):
            for b in sorted(calls[a] | tables[a]):
                style = [] if b in calls[a] else ['style=dashed']
                if (min(a, b), max(a, b)) in pairs:
                    style.append('color=red')
                f.write('  "%s" -> "%s"%s;\n' % (a, b, ' [%s]' % ','.join(style) if style else ''))
        f.write('}\n')


def merged(calls, tables):
    return {a: calls[a] | tables[a] for a in calls}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('build')
    ap.add_argument('--dot', metavar='OUT', help='write the graph as Graphviz DOT')
    ap.add_argument('--max-circles', type=int, metavar='N',
                    help='exit 1 with more than N two-file circles of calls')
    ap.add_argument('--tables', action='store_true',
                    help='count references to data (tables of kinds) as calls')
    args = ap.parse_args()
    objs = objects(args.build, source_root(args.build))
    if not objs:
        print('structure: no production objects in %s (build it first)' % args.build)
        return 1
    calls, tables = graph(objs)
    edges = merged(calls, tables) if args.tables else calls
    pairs = circles(edges)
    table_pairs = [p for p in circles(merged(calls, tables)) if p not in pairs]
    comps = [c for c in components(edges) if len(c) > 2]
    print('structure: %d files, %d calls, %d table references; %d two-file circles, '
          '%d longer cycles' % (len(calls), sum(len(e) for e in calls.values()),
                                sum(len(e - calls[a]) for a, e in tables.items()), len(pairs),
                                len(comps)))
    for a, b in pairs:
        print('circle: %s <-> %s' % (a, b))
    for comp in comps:
        print('cycle of %d files: %s' % (len(comp), ' -> '.join(cycle_through(edges, comp))))
    for a, b in table_pairs:
        print('table circle (not counted): %s <-> %s' % (a, b))
    if args.dot:
        write_dot(calls, tables, set(pairs) | set(table_pairs), args.dot)
    if args.max_circles is not None and len(pairs) > args.max_circles:
        print('structure: %d two-file circles, more than the %d allowed' %
              (len(pairs), args.max_circles))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
