"""``icplay images build [ENV]``: build icplay's task images (one or more per language) with visible progress;
``icplay images build nl2bash --from-intercode PATH``: InterCode's four NL2Bash images."""

from __future__ import annotations

import sys
from icplay.process import UserError
from icplay.sandbox.registry import image_engine, image_kinds
from icplay.languages import all_specs
from icplay.sandbox.images import IMAGES, build_image, image_exists
from icplay.paths import intercode_dir

NL2BASH = "nl2bash"


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("images", help="build or list icplay's Docker images")
    actions = p.add_subparsers(dest="images_action", metavar="ACTION")
    build = actions.add_parser("build", help="build the task images (all, or one: bash, sql, python, ctf; nl2bash: InterCode's)")
    build.add_argument("env", nargs="*", help="which images (default: all of icplay's; nl2bash: InterCode's four "
                                              "NL2Bash images, intercode-nl2bash-fs1..fs4)")
    build.add_argument("--from-intercode", metavar="PATH",
                       help="nl2bash: an InterCode checkout, or its docker/ folder (default: ../shared/intercode)")
    build.add_argument("--base", metavar="IMAGE",
                       help="nl2bash: the base image to build on (default: the Dockerfile's ubuntu:latest if "
                            "present, else a local Debian or Ubuntu)")
    _add_engine_argument(build)
    build.set_defaults(func=run_build)
    listing = actions.add_parser("list", help="show which images exist")
    _add_engine_argument(listing)
    listing.set_defaults(func=run_list)
    p.set_defaults(func=run_list)


def _add_engine_argument(parser) -> None:
    parser.add_argument("--sandbox", default="docker", choices=image_kinds(),
                        help="whose images: the sandbox that runs them (default docker)")


def _client(args):
    """The API client of the engine ``--sandbox`` names (docker, podman, a plug-in's)."""
    return image_engine(getattr(args, "sandbox", None) or "docker").client()


def _say(line: str) -> None:
    print("  " + line.rstrip(), file=sys.stderr)


def run_build(args) -> int:
    all_specs()   # each language's spec registers its images
    names = args.env or list(IMAGES)
    for name in names:
        if name not in IMAGES and name != NL2BASH:
            raise UserError(f"no image {name!r} (known: {', '.join([*IMAGES, NL2BASH])})")
    if (args.from_intercode or args.base) and NL2BASH not in names:
        raise UserError("--from-intercode and --base are for `icplay images build nl2bash`")
    client = _client(args)
    for name in names:
        if name == NL2BASH:
            _build_nl2bash(client, args)
            continue
        print(f"building {IMAGES[name].name} ...", file=sys.stderr)
        build_image(client, name, _say)
        print(f"built {IMAGES[name].name}", file=sys.stderr)
    return 0


def _build_nl2bash(client, args) -> None:
    from icplay.bash.intercode_images import IntercodeSourceError, build_nl2bash_images

    source = args.from_intercode or intercode_dir()
    if source is None:
        raise UserError("say where InterCode is: icplay images build nl2bash --from-intercode PATH "
                        "(a checkout of github.com/princeton-nlp/intercode)")
    try:
        built = build_nl2bash_images(client, source, _say, base=args.base)
    except IntercodeSourceError as exc:
        raise UserError(str(exc)) from None
    for name, base in built:
        print(f"built {name} (on {base})", file=sys.stderr)


def run_list(args) -> int:
    from icplay.bash.intercode_images import VERSIONS, image_name

    all_specs()
    client = _client(args)
    for name, spec in IMAGES.items():
        engine = "" if args.sandbox == "docker" else f" --sandbox {args.sandbox}"
        state = "present" if image_exists(client, spec.name) else f"missing (icplay images build {name}{engine})"
        print(f"{name:<7} {spec.name:<24} {state}")
    for version in VERSIONS:
        tag = image_name(version)
        state = "present" if image_exists(client, tag) else "missing (icplay images build nl2bash --from-intercode PATH)"
        print(f"{NL2BASH:<7} {tag:<24} {state}")
    return 0
