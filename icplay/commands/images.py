"""``icplay images build [ENV]``: build icplay's task images (one or more per language) with visible progress."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("images", help="build or list icplay's Docker images")
    actions = p.add_subparsers(dest="images_action", metavar="ACTION")
    build = actions.add_parser("build", help="build the task images (all, or one: bash, sql)")
    build.add_argument("env", nargs="*", help="which images (default: all)")
    build.set_defaults(func=run_build)
    listing = actions.add_parser("list", help="show which images exist")
    listing.set_defaults(func=run_list)
    p.set_defaults(func=run_list)


def run_build(args) -> int:
    from icplay.cli import UserError
    from icplay.languages import all_specs
    from icplay.sandbox.images import IMAGES, build_image, docker_client

    all_specs()   # each language's spec registers its images

    client = docker_client()
    names = args.env or list(IMAGES)
    for name in names:
        if name not in IMAGES:
            raise UserError(f"no image {name!r} (known: {', '.join(IMAGES)})")
    for name in names:
        print(f"building {IMAGES[name].name} ...", file=sys.stderr)
        build_image(client, name, lambda line: print("  " + line.rstrip(), file=sys.stderr))
        print(f"built {IMAGES[name].name}", file=sys.stderr)
    return 0


def run_list(args) -> int:
    from icplay.languages import all_specs
    from icplay.sandbox.images import IMAGES, docker_client, image_exists

    all_specs()

    client = docker_client()
    for name, spec in IMAGES.items():
        print(f"{name:<6} {spec.name:<24} {'present' if image_exists(client, spec.name) else 'missing (icplay images build ' + name + ')'}")
    return 0
