"""Rebuild the frozen table of rewritten instructions (the ``semantic`` perturbation).

    python release/build_instructions.py            # write pytest_libero/data/libero_instructions.json
    python release/build_instructions.py --check    # exit 1 if the committed table is stale

For every native entry (libero_spatial, libero_object, libero_goal, libero_10,
libero_90) four instructions, one per level, each the entry's own goal said
differently. The rules, in order of level (each level keeps the one before's kind of
change, with the same choices, and adds its own; docs/perturbations.md prints them with
an example):

1. **One synonym.** One word or phrase of the instruction that has synonyms below
   (a verb, a preposition phrase or a noun) is replaced by one of them.
2. **Synonyms throughout, another sentence frame.** Every such word or phrase is
   replaced, and the sentence (with level 3's clause) is put in one of ``FRAMES``.
3. **Plus a clause about an uninvolved object.** A ``CLAUSES`` sentence names one
   object of the scene that the task does not involve (not among the BDDL's objects of
   interest, not named by the instruction); a table or the floor only when nothing
   else is left.
4. **Plus descriptions.** Each task object (an object of interest) the instruction
   names is named by its ``DESCRIPTIONS`` entry instead, where the scene holds exactly
   one object of that kind; the others keep their level-2 wording. Where no task object
   can be described (each shares its kind with another), the clause's object is
   described instead.

Every choice (which word, which synonym, frame, clause, object) is drawn once per case
with Python's ``random.Random`` seeded by a sha256 of this table's version, the
documented perturbation seed and the case id, so the levels build on each other and the
script run again writes the same bytes. Only words from the lists below and the
instruction's own words appear: no rewrite names a suite, a level, a case or anything
else the protocol keeps from the policy. The goal (the BDDL) never changes; only what the policy is told does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from pytest_libero.perturb.kinds.semantic import SHIPPED_SHA256  # noqa: E402 (after the path)
from pytest_libero.perturb.levels import PERTURB_SEED  # noqa: E402
from pytest_libero.perturb.tasks import scene_from_bddl  # noqa: E402

TABLE_PATH = REPO_ROOT / "pytest_libero" / "data" / "libero_instructions.json"
SCHEMA = "pytest-libero/instructions/1"
VERSION = "pytest-libero-instructions/2"
"""Raise it whenever a rule or a word list changes: the table's bytes change with it."""
SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
RECORDED_RULES = "catalog/build_instructions.py; docs/perturbations.md"
"""Where the table says its rules live, as the table records it. The script's folder was
called ``catalog/`` when the table was frozen, and the perturbed identity hashes the
table's bytes (``table_sha256`` in pytest_libero/perturb/kinds/semantic.py): the recorded
name stays until the table is rebuilt for another reason."""

# Words and phrases with their synonyms. Keys are matched whole-word, longest first;
# nouns are matched through NOUNS below and get their synonyms from NOUN_SYNONYMS.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "pick up": ("lift", "grab", "take"),
    "place": ("set", "put"),
    "put": ("place", "set"),
    "open": ("pull open", "open up"),
    "close": ("shut",),
    "turn on": ("switch on",),
    "turn off": ("switch off",),
    "push": ("slide", "shove"),
    "stack": ("pile",),
    "on top of": ("atop",),
    "next to": ("beside",),
    "inside": ("into it",),
}
# Phrases that name an object, each with the object kinds (BDDL types) it can name; the
# one the scene holds is meant. Matched longest first.
NOUNS: dict[str, tuple[str, ...]] = {
    "black bowl": ("akita_black_bowl",),
    "white bowl": ("white_bowl",),
    "bowl": ("akita_black_bowl", "white_bowl"),
    "plate": ("plate",),
    "ramekin": ("glazed_rim_porcelain_ramekin",),
    "cookie box": ("cookies",),
    "wooden cabinet": ("wooden_cabinet",),
    "cabinet shelf": ("wooden_two_layer_shelf",),
    "cabinet": ("wooden_cabinet", "white_cabinet", "wooden_two_layer_shelf"),
    "shelf": ("wooden_two_layer_shelf",),
    "stove": ("flat_stove",),
    "alphabet soup": ("alphabet_soup",),
    "cream cheese box": ("cream_cheese",),
    "cream cheese": ("cream_cheese",),
    "salad dressing": ("salad_dressing", "new_salad_dressing"),
    "bbq sauce": ("bbq_sauce",),
    "ketchup": ("ketchup",),
    "tomato sauce": ("tomato_sauce",),
    "butter": ("butter",),
    "milk": ("milk",),
    "chocolate pudding": ("chocolate_pudding",),
    "orange juice": ("orange_juice",),
    "basket": ("basket",),
    "wine bottle": ("wine_bottle",),
    "wine rack": ("wine_rack",),
    "rack": ("wine_rack",),
    "frying pan": ("chefmate_8_frypan",),
    "moka pots": ("moka_pot",),
    "moka pot": ("moka_pot",),
    "microwave": ("microwave",),
    "yellow and white mug": ("white_yellow_mug",),
    "white mug": ("porcelain_mug",),
    "red mug": ("red_coffee_mug",),
    "tray": ("wooden_tray",),
    "book": ("black_book", "yellow_book"),
    "caddy": ("desk_caddy",),
}
NOUN_SYNONYMS: dict[str, tuple[str, ...]] = {
    "stove": ("cooktop", "hob"),
    "cabinet": ("cupboard",),
    "wooden cabinet": ("wooden cupboard",),
    "frying pan": ("skillet",),
    "microwave": ("microwave oven",),
    "caddy": ("desk organizer",),
    "rack": ("bottle rack",),
    "wine rack": ("bottle rack",),
    "yellow and white mug": ("yellow and white cup",),
    "white mug": ("white cup",),
    "red mug": ("red cup",),
    "cookie box": ("box of cookies",),
}
# Level 4: what a task object is called instead of its name (unique per kind).
DESCRIPTIONS: dict[str, str] = {
    "akita_black_bowl": "deep black dish",
    "white_bowl": "deep white dish",
    "plate": "flat round dish",
    "glazed_rim_porcelain_ramekin": "small glazed baking cup",
    "cookies": "box of biscuits",
    "wooden_cabinet": "wooden chest of drawers",
    "white_cabinet": "white chest of drawers",
    "wooden_two_layer_shelf": "two-tier wooden stand",
    "flat_stove": "electric cooking hob",
    "alphabet_soup": "can of letter-shaped pasta soup",
    "cream_cheese": "small carton of soft cheese spread",
    "salad_dressing": "bottle of vinaigrette",
    "new_salad_dressing": "bottle of vinaigrette",
    "bbq_sauce": "bottle of smoky grilling sauce",
    "ketchup": "squeeze bottle of red condiment",
    "tomato_sauce": "can of cooking passata",
    "butter": "packet of dairy spread",
    "milk": "carton of dairy drink",
    "chocolate_pudding": "cocoa dessert pack",
    "orange_juice": "carton of citrus drink",
    "basket": "woven carrier",
    "wine_bottle": "tall dark glass bottle",
    "wine_rack": "bottle holder",
    "chefmate_8_frypan": "flat pan with a long handle",
    "moka_pot": "stovetop coffee maker",
    "microwave": "small countertop oven",
    "white_yellow_mug": "two-tone cup",
    "porcelain_mug": "plain white cup",
    "red_coffee_mug": "red coffee cup",
    "wooden_tray": "shallow wooden carrier",
    "black_book": "hardback volume",
    "yellow_book": "hardback volume",
    "desk_caddy": "desk organizer",
}
# Level 3: plain names of scene objects for the clause (tables and the floor last).
PLAIN_NAMES: dict[str, str] = {
    "akita_black_bowl": "black bowl", "white_bowl": "white bowl", "plate": "plate",
    "glazed_rim_porcelain_ramekin": "ramekin", "cookies": "cookie box",
    "wooden_cabinet": "wooden cabinet", "white_cabinet": "white cabinet",
    "wooden_two_layer_shelf": "shelf", "flat_stove": "stove", "alphabet_soup": "alphabet soup",
    "cream_cheese": "cream cheese", "salad_dressing": "salad dressing",
    "new_salad_dressing": "salad dressing", "bbq_sauce": "bbq sauce", "ketchup": "ketchup",
    "tomato_sauce": "tomato sauce", "butter": "butter", "milk": "milk",
    "chocolate_pudding": "chocolate pudding", "orange_juice": "orange juice",
    "basket": "basket", "wine_bottle": "wine bottle", "wine_rack": "wine rack",
    "chefmate_8_frypan": "frying pan", "moka_pot": "moka pot", "microwave": "microwave",
    "white_yellow_mug": "yellow and white mug", "porcelain_mug": "white mug",
    "red_coffee_mug": "red mug", "wooden_tray": "tray", "black_book": "black book",
    "yellow_book": "yellow book", "desk_caddy": "caddy",
}
SURFACES: dict[str, str] = {
    "table": "table", "kitchen_table": "table", "living_room_table": "table",
    "study_table": "desk", "floor": "floor",
}
FRAMES: tuple[str, ...] = (
    "please {s}",
    "kindly {s}",
    "could you {s}",
    "i need you to {s}",
    "your job is to {s}",
    "go ahead and {s}",
)
CLAUSES: tuple[str, ...] = (
    "{s}; the {o} is not needed",
    "{s}, ignoring the {o}",
    "{s} and leave the {o} out of it",
    "{s}; never mind the {o}",
)
PLURAL_CLAUSES: tuple[str, ...] = (
    "{s}; the {o}s are not needed",
    "{s}, ignoring the {o}s",
)


def draw_for(case_id: str) -> random.Random:
    """The generator of one case: sha256 of the version, the seed and the case id. One
    generator for all four levels, so each level keeps the choices of the one before."""
    text = f"{VERSION}:{PERTURB_SEED}:{case_id}"
    return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little"))


def scene_of(bddl_text: str) -> tuple[dict[str, str], set[str]]:
    """The BDDL's objects and fixtures (instance -> kind) and its task objects (the
    objects of interest, a region standing for its owner: perturb/tasks.py's rule)."""
    scene = scene_from_bddl(bddl_text)
    return {**scene.fixtures, **scene.objects}, set(scene.task_objects())


def tokens(instruction: str) -> list[tuple[str, str]]:
    """The instruction as (text, role) pieces: role ``word``, ``syn`` (a SYNONYMS key)
    or ``noun`` (a NOUNS key), matched whole-word and longest first."""
    words = instruction.split()
    phrases = sorted({*((p, "syn") for p in SYNONYMS), *((p, "noun") for p in NOUNS)},
                     key=lambda pr: -len(pr[0].split()))
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        for phrase, role in phrases:
            n = len(phrase.split())
            if words[i:i + n] == phrase.split():
                out.append((phrase, role))
                i += n
                break
        else:
            out.append((words[i], "word"))
            i += 1
    return out


def noun_kind(phrase: str, kinds: dict[str, str]) -> str | None:
    """The object kind a noun phrase names in this scene (the first candidate it holds)."""
    present = set(kinds.values())
    return next((k for k in NOUNS[phrase] if k in present), None)


def rewrites(case_id: str, instruction: str, bddl_text: str) -> dict[int, str]:
    """The instruction at levels 1-4, by the module's rules. Every choice is drawn once,
    in a fixed order, and each level applies the choices of the levels below it: level 2
    keeps level 1's synonym, level 3 is level 2 with the clause, level 4 is level 3 with
    the descriptions."""
    rng = draw_for(case_id)
    kinds, interest = scene_of(bddl_text)
    pieces = tokens(instruction)
    slots = [i for i, (text, role) in enumerate(pieces)
             if role == "syn" or (role == "noun" and text in NOUN_SYNONYMS)]
    if not slots:
        raise ValueError(f"{case_id}: {instruction!r} has no word with a synonym; add one")
    first = rng.choice(slots)
    synonym = {i: rng.choice((SYNONYMS | NOUN_SYNONYMS)[pieces[i][0]]) for i in slots}
    frame = rng.choice(FRAMES)
    task_kinds = {kinds[n] for n in interest}
    counts: dict[str, int] = {}
    for kind in kinds.values():
        counts[kind] = counts.get(kind, 0) + 1
    named = {noun_kind(t, kinds) for t, r in pieces if r == "noun"}
    # Never an object of the same sort as one the instruction names ("the yellow books"
    # beside "the book in the middle"): that would tell which one is meant.
    said = set(instruction.split())
    left = sorted({k for k in kinds.values() if k not in task_kinds | named
                   and PLAIN_NAMES.get(k, k).split()[-1] not in said})
    others = [k for k in left if k in PLAIN_NAMES] or [k for k in left if k in SURFACES]
    if not others:
        raise ValueError(f"{case_id}: its scene has no object the task leaves alone")
    other = rng.choice(others)
    clause = rng.choice(PLURAL_CLAUSES if counts[other] > 1 else CLAUSES)
    # A description names one object only when no other object of the scene shares it
    # (the black and the yellow book are both "hardback volume").
    described: dict[str, int] = {}
    for kind in kinds.values():
        if kind in DESCRIPTIONS:
            described[DESCRIPTIONS[kind]] = described.get(DESCRIPTIONS[kind], 0) + 1

    def alone(kind: str | None) -> bool:
        return (kind is not None and counts.get(kind) == 1
                and described.get(DESCRIPTIONS.get(kind, ""), 0) == 1)

    describe = {i for i, (text, role) in enumerate(pieces)
                if role == "noun" and noun_kind(text, kinds) in task_kinds and alone(noun_kind(text, kinds))}
    # Where every task object shares its kind (two black bowls), level 4 describes the
    # clause's object instead, so it still changes what the policy reads.
    other_name = PLAIN_NAMES.get(other) or SURFACES[other]
    other_described = DESCRIPTIONS[other] if not describe and alone(other) else other_name

    def said_at(level: int) -> str:
        out = []
        for i, (text, _) in enumerate(pieces):
            if level >= 4 and i in describe:
                out.append(DESCRIPTIONS[noun_kind(text, kinds) or ""])
            elif i == first or (level >= 2 and i in synonym):
                out.append(synonym[i])
            else:
                out.append(text)
        sentence = " ".join(out)
        if level >= 3:
            sentence = clause.format(s=sentence, o=other_described if level >= 4 else other_name)
        return frame.format(s=sentence) if level >= 2 else sentence

    return {level: said_at(level) for level in (1, 2, 3, 4)}


def rewrite(case_id: str, instruction: str, bddl_text: str, level: int) -> str:
    """The instruction at one level (1-4)."""
    return rewrites(case_id, instruction, bddl_text)[level]


def build(read_bddl: Any = None) -> dict[str, Any]:
    """The whole table from the installed catalog and its BDDL files."""
    from pytest_libero.catalog.entries import load_catalog
    from pytest_libero.catalog.inventory import installed_files

    entries: dict[str, dict[str, str]] = {}
    for entry in load_catalog().entries:
        if entry.suite not in SUITES:
            continue
        if read_bddl is None:
            bddl_text = installed_files(entry.bddl_file, entry.init_states_file)[0].read_text()
        else:
            bddl_text = read_bddl(entry)
        said = rewrites(entry.case_id, entry.language, bddl_text)
        entries[entry.case_id] = {"task": entry.language,
                                  **{str(level): text for level, text in said.items()}}
    return {"schema": SCHEMA, "generator": VERSION, "seed": PERTURB_SEED,
            "rules": RECORDED_RULES,
            "entries": entries}


def render(table: dict[str, Any]) -> str:
    """The table's bytes: sorted keys, indent 1, a trailing newline."""
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed table; exit 1 if it is stale")
    args = parser.parse_args(argv)
    text = render(build())
    digest = hashlib.sha256(text.encode()).hexdigest()
    pinned = digest == SHIPPED_SHA256
    if args.check:
        same = TABLE_PATH.is_file() and TABLE_PATH.read_text() == text
        print(f"{TABLE_PATH.name}: {'up to date' if same else 'STALE: rebuild it'}"
              f"{'' if pinned else f'; pin sha256 {digest} as SHIPPED_SHA256'}")
        return 0 if same and pinned else 1
    TABLE_PATH.write_text(text)
    print(f"wrote {TABLE_PATH} ({len(text)} bytes)")
    if not pinned:
        print(f"pin it: SHIPPED_SHA256 = {digest!r} in pytest_libero/perturb/kinds/semantic.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
