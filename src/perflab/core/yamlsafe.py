"""The YAML loader for what users write (job files, `--set KEY=VALUE`): safe, small, unambiguous.

On top of PyYAML's safe loader it refuses two things, each at its line:
- aliases (`*name`): a few hundred bytes of nested aliases expand to gigabytes
  (a "billion laughs"); a job file has no need of them, so none is followed;
- a key given twice in one mapping: YAML keeps the last silently, which hides
  a typo (`runs: 1` ... `runs: 2`).
Errors are `yaml.YAMLError`s with a mark, so a caller reports them as it
reports any other YAML error (file:line: problem).
"""

from __future__ import annotations

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader without aliases and without duplicate keys."""

    def compose_node(self, parent, index):
        if self.check_event(AliasEvent):
            event = self.peek_event()
            raise ComposerError(None, None, f"alias *{event.anchor} refused: job files may not use YAML aliases "
                                "(write the value out)", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:       # an unhashable key: the base class says so
                break
            if first is not None:
                shown = repr(key) if len(repr(key)) <= 60 else repr(key)[:57] + "..."
                raise ConstructorError(None, None, f"duplicate key {shown} (first given at line {first})",
                                       key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def load(text: str):
    """One YAML document, read with StrictLoader."""
    return yaml.load(text, Loader=StrictLoader)
