"""The box every prompt (a modal asking one thing) is drawn in: centred, 80% wide up to 100
columns, a thick border in the prompt's colour, and its title in that colour."""

from __future__ import annotations


def prompt_box_css(screen: str, prefix: str, colour: str = "$accent") -> str:
    """CSS for ``screen`` (its class name): the box, and the title ``#<prefix>-title``."""
    return f"""
    {screen} {{ align: center middle; }}
    {screen} > Vertical {{
        width: 80%;
        max-width: 100;
        height: auto;
        border: thick {colour};
        background: $surface;
        padding: 1 2;
    }}
    {screen} #{prefix}-title {{ text-style: bold; color: {colour}; }}
    """
