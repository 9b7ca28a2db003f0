"""Jupyter notebooks (nbformat 4 JSON) for the notebook-copying variants."""

from __future__ import annotations

import json

# Argument bounds, read by `osguard validate` from this literal (see tasks/README.md).
ARGS = {
    "ipynb": {
        "title": {"type": "string", "maxLength": 200},
        "status": {"type": "string", "maxLength": 40},
        "cells": {"type": "integer", "minimum": 0, "maximum": 1000},
    },
}


def ipynb(title: str, status: str = "passed", cells: int = 2) -> bytes:
    """A small notebook whose first cell names the experiment and its status."""
    source = [
        {"cell_type": "markdown", "metadata": {}, "source": [f"# {title}\n", f"Run status: **{status}**\n"]},
    ]
    for index in range(cells):
        source.append({
            "cell_type": "code", "execution_count": index + 1, "metadata": {},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": [f"step {index + 1}: {status}\n"]}],
            "source": [f"result_{index} = run_step({index + 1})\n", f"print('step {index + 1}:', result_{index})"],
        })
    notebook = {
        "cells": source,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python", "version": "3.10"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    return (json.dumps(notebook, indent=1) + "\n").encode("utf-8")
