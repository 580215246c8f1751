"""The Lobster compiler: pipeline strings and workflow files to vm bytecode."""
