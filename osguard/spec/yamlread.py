"""A strict, hostile-input-safe YAML reader that remembers where every value came from.

``yaml.safe_load`` silently keeps the last of two duplicate keys, expands aliases without
limit and turns ``0644`` into 420. This reader composes the node graph (which keeps start
marks) and converts it itself:

- duplicate mapping keys, recursive aliases, merge keys (``<<``), unknown tags, binary
  values and documents that expand beyond ``MAX_NODES`` values are problems, not data;
- mapping keys are always their literal text (``on:`` stays the string ``"on"``);
- plain scalars that look like octal modes (``0644``) stay strings;
- timestamps stay the text the author wrote.

The result is the data plus a table from JSON path (a tuple of keys and indexes) to the
1-based line of the value, and of each key, for error messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_BYTES = 1 << 20  # a spec is a page of YAML; anything bigger is a mistake or an attack
MAX_NODES = 100_000  # values after alias expansion ("billion laughs" stops here)
MAX_DEPTH = 64

_OCTAL_MODE = re.compile(r"^0[0-7]{3,4}$")
_INT_TAG = "tag:yaml.org,2002:int"
_STR_TAG = "tag:yaml.org,2002:str"
_KNOWN_SCALAR_TAGS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    _INT_TAG,
    "tag:yaml.org,2002:float",
    _STR_TAG,
    "tag:yaml.org,2002:timestamp",
}

JsonPath = tuple[str | int, ...]


@dataclass
class ReadProblem:
    """A problem found while reading (before any schema check)."""

    line: int | None
    path: JsonPath
    message: str


@dataclass
class YamlDoc:
    """The data of one YAML document and where each part of it came from."""

    data: Any = None
    lines: dict[JsonPath, int] = field(default_factory=dict)  # path -> line of the value
    key_lines: dict[JsonPath, int] = field(default_factory=dict)  # path -> line of its key
    problems: list[ReadProblem] = field(default_factory=list)

    def line_of(self, path: JsonPath, *, key: bool = False) -> int | None:
        """The line of ``path`` (of its key when ``key``), else of its nearest ancestor."""
        if key and path in self.key_lines:
            return self.key_lines[path]
        probe = tuple(path)
        while True:
            if probe in self.lines:
                return self.lines[probe]
            if not probe:
                return None
            probe = probe[:-1]


class _TooBig(Exception):
    pass


def _loader_class() -> type:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(raw: bytes) -> YamlDoc:
    """Read one YAML document from bytes; never raises for bad input.

    Args:
        raw: the file's bytes.

    Returns:
        A :class:`YamlDoc`; when ``problems`` is not empty, ``data`` may be partial or None.
    """
    import yaml

    doc = YamlDoc()
    if len(raw) > MAX_BYTES:
        doc.problems.append(ReadProblem(None, (), f"file is larger than {MAX_BYTES // 1024} KiB; a spec is one page of YAML"))
        return doc
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        doc.problems.append(ReadProblem(line, (), "file contains a NUL byte: not a text file"))
        return doc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        doc.problems.append(ReadProblem(line, (), f"file is not UTF-8 text (byte 0x{raw[exc.start]:02x})"))
        return doc
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        loader = _loader_class()(text)
        try:
            nodes = []
            while loader.check_node():
                nodes.append(loader.get_node())
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            started = exc.context_mark.line + 1 if exc.context_mark is not None else None
            where = f" started on line {started}" if started is not None and started != line else ""
            what += f" ({exc.context}{where})"
        doc.problems.append(ReadProblem(line, (), f"YAML syntax error: {what}"))
        return doc
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        char = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        doc.problems.append(ReadProblem(line, (), f"YAML does not allow the control character #x{char:04x}"))
        return doc
    except yaml.YAMLError as exc:
        doc.problems.append(ReadProblem(None, (), f"YAML error: {exc}"))
        return doc
    except RecursionError:
        doc.problems.append(ReadProblem(None, (), "YAML nesting is too deep"))
        return doc
    if not nodes:
        doc.problems.append(ReadProblem(1, (), "file is empty: expected a mapping with id, version, base, ..."))
        return doc
    if len(nodes) > 1:
        doc.problems.append(ReadProblem(nodes[1].start_mark.line + 1, (), "expected one YAML document, found several ('---')"))
        return doc
    converter = _Converter(doc)
    try:
        doc.data = converter.convert(nodes[0], (), ())
    except _TooBig:
        doc.data = None
        doc.problems.append(ReadProblem(None, (), f"document expands to more than {MAX_NODES} values (aliases?)"))
    except RecursionError:
        doc.data = None
        doc.problems.append(ReadProblem(None, (), "YAML nesting is too deep"))
    return doc


class _Converter:
    def __init__(self, doc: YamlDoc):
        self.doc = doc
        self.count = 0
        import yaml

        self._scalar_loader = yaml.SafeLoader("")  # its constructor resolves scalar tags

    def _problem(self, node: Any, path: JsonPath, message: str) -> None:
        self.doc.problems.append(ReadProblem(node.start_mark.line + 1, path, message))

    def convert(self, node: Any, path: JsonPath, stack: tuple[int, ...]) -> Any:
        import yaml

        self.count += 1
        if self.count > MAX_NODES:
            raise _TooBig()
        self.doc.lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in stack:
            self._problem(node, path, "recursive alias: a value that contains itself")
            return None
        if len(stack) >= MAX_DEPTH:
            self._problem(node, path, f"nested deeper than {MAX_DEPTH} levels")
            return None
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        inner = stack + (id(node),)
        if isinstance(node, yaml.SequenceNode):
            if node.tag not in ("tag:yaml.org,2002:seq",):
                self._problem(node, path, f"unsupported YAML tag {node.tag!r}")
                return None
            return [self.convert(item, path + (i,), inner) for i, item in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            if node.tag not in ("tag:yaml.org,2002:map",):
                self._problem(node, path, f"unsupported YAML tag {node.tag!r}")
                return None
            out: dict[str, Any] = {}
            first_line: dict[str, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    self._problem(key_node, path, "a mapping key must be a plain text, not a list or mapping")
                    continue
                if key_node.tag == "tag:yaml.org,2002:merge":
                    self._problem(key_node, path, "merge keys ('<<') are not supported: write the keys out")
                    continue
                key = key_node.value
                key_line = key_node.start_mark.line + 1
                if key in first_line:
                    self._problem(key_node, path + (key,), f"duplicate key {key!r} (first defined on line {first_line[key]})")
                    continue
                first_line[key] = key_line
                self.doc.key_lines[path + (key,)] = key_line
                out[key] = self.convert(value_node, path + (key,), inner)
            return out
        self._problem(node, path, "unsupported YAML node")
        return None

    def _scalar(self, node: Any, path: JsonPath) -> Any:
        tag = node.tag
        if tag == _INT_TAG and not node.style and _OCTAL_MODE.match(node.value):
            return node.value  # `mode: 0644` means the mode "0644", not the number 420
        if tag == "tag:yaml.org,2002:timestamp":
            return node.value
        if tag == "tag:yaml.org,2002:binary":
            self._problem(node, path, "binary values (!!binary) are not supported: use a write step with base64:")
            return None
        if tag not in _KNOWN_SCALAR_TAGS:
            self._problem(node, path, f"unsupported YAML tag {tag!r}")
            return None
        try:
            return self._scalar_loader.construct_object(node, deep=True)
        except Exception as exc:  # a malformed int/float literal the resolver accepted
            self._problem(node, path, f"cannot read value {node.value!r}: {exc}")
            return None
