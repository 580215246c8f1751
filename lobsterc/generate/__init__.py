"""Checked trees to bytecode: code generation for pipelines and workflow files, and the
compile cache."""
