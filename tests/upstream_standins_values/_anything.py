"""What the module stand-ins hand out for any name: an object every attribute, call and subscript of which is another
such object, and which a class statement may name as a base. Iterating one is refused (it would never end)."""


class Anything:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> "Anything":
        return Anything()

    def __getattr__(self, name: str) -> "Anything":
        return Anything()

    def __getitem__(self, key: object) -> "Anything":
        return Anything()

    def __iter__(self) -> "Anything":
        raise TypeError("a stand-in is not iterable")

    def __mro_entries__(self, bases: tuple[object, ...]) -> tuple[type, ...]:
        return (object,)
