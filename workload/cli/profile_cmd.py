"""``workload profiles`` and ``workload show``: what profiles exist and what one resolves to."""

from __future__ import annotations

import click

from workload.cli.options import parameter_options, profile_options, resolve_from_options


@click.command("profiles")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {name, description, path}.")
def profiles_command(as_json: bool) -> int:
    """List the profiles shipped with workload (use the name with --profile)."""
    import json

    from workload.commands import mask_text
    from workload.resources import profile_dir, shipped_profiles

    listing = []
    for name in shipped_profiles():
        try:
            description = json.loads((profile_dir() / f"{name}.json").read_text()).get("Description", "")
        except (OSError, ValueError, AttributeError):
            description = "(unreadable)"
        shown = " ".join(mask_text(str(description)).split())  # one line per profile, whatever its text holds
        listing.append({"name": name, "description": shown, "path": str(profile_dir() / f"{name}.json")})
    if as_json:
        click.echo(json.dumps(listing, indent=2))
        return 0
    width = max((len(entry["name"]) for entry in listing), default=0)  # one column, however long the names
    for entry in listing:
        click.echo(f"{entry['name']:<{width}}  {entry['description']}")
    return 0


@click.command("show")
@profile_options
@parameter_options
@click.option("--json", "as_json", is_flag=True, help="Print the resolved profile as JSON.")
def show_command(profile: str, parameters: tuple[str, ...], scenarios: str | None, as_json: bool) -> int:
    """Show PROFILE resolved: parameters (after --parameters) and every step with its parameters.

    PROFILE is a shipped name (PERF-GPU-MLPERF, with or without .json) or a path to a JSON file,
    given as the argument or as --profile PROFILE (as run and plan take it; they take both too).
    Nothing connects to any host. Secrets are shown as *** (parameters named like a password,
    token, secret or key, and passwords inside URLs).
    """
    import json

    from workload.params import display_parameters

    resolved = resolve_from_options(profile, parameters, scenarios)
    if as_json:
        click.echo(json.dumps(resolved.to_json(), indent=2))
        return 0
    click.echo(f"{resolved.name}: {resolved.shown_description}")
    click.echo(f"  file: {resolved.path}")
    # What the profile runs on (Metadata "Supported*": GPUs, harness rounds, platforms), shown literally.
    supported = {k: v for k, v in display_parameters(resolved.metadata).items() if k.startswith("Supported")}
    if supported:
        click.echo("Supports:")
        for key, value in supported.items():
            click.echo(f"  {key.removeprefix('Supported')}: {value}")
    click.echo("Parameters:")
    for key, value in display_parameters(resolved.parameters, resolved.secrets).items():
        click.echo(f"  {key} = {json.dumps(value)}")
    for title, steps in (("Dependencies", resolved.dependencies), ("Actions", resolved.actions)):
        click.echo(f"{title}:")
        if not steps:
            click.echo("  (none)")
        for step in steps:
            click.echo(f"  {step.label}")
            for key, value in display_parameters(step.params.model_dump(exclude_none=True), resolved.secrets).items():
                click.echo(f"      {key} = {json.dumps(value, default=str)}")
    return 0
