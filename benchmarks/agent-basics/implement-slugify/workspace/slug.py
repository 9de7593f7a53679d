"""URL slugs."""


def slugify(text):
    """Turn a title into a URL slug.

    - letters are lower-cased;
    - every run of characters that are not ASCII letters or digits becomes a single "-";
    - the slug neither starts nor ends with "-".

    >>> slugify("Hello, World!")
    'hello-world'
    >>> slugify("  Sandboxed   agents -- 101 ")
    'sandboxed-agents-101'
    """
    raise NotImplementedError
