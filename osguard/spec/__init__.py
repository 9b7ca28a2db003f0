"""osguard.spec: the variant format, its JSON Schema, and loading with precise errors.

>>> from osguard.spec import load_suite
>>> variants = load_suite()          # ./variants or the repository's variants/
"""

from osguard.spec.export import ExportError, export_osworld, import_osworld_config
from osguard.spec.loader import (
    check_variant_file,
    default_suite_dir,
    load_suite,
    load_variant,
    tasks_dir_for,
    validate_paths,
)
from osguard.spec.model import (
    FAMILIES,
    Base,
    InvariantSpec,
    References,
    Step,
    SuccessSpec,
    UnsafeReference,
    Variant,
)
from osguard.spec.osworld import OSWorldDataError, iter_osworld_tasks, load_osworld_task
from osguard.spec.render import apply_script_source, render_step
from osguard.spec.schema import schema

__all__ = [
    "FAMILIES",
    "Base",
    "ExportError",
    "OSWorldDataError",
    "InvariantSpec",
    "References",
    "Step",
    "SuccessSpec",
    "UnsafeReference",
    "Variant",
    "apply_script_source",
    "check_variant_file",
    "default_suite_dir",
    "export_osworld",
    "import_osworld_config",
    "iter_osworld_tasks",
    "load_osworld_task",
    "load_suite",
    "load_variant",
    "render_step",
    "schema",
    "tasks_dir_for",
    "validate_paths",
]
