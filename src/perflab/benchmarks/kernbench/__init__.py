"""The `kernbench` family (its code: .family; its report view: .view).

The package itself imports nothing, so that `report html` reaches the view hook without the
family's parameter model (pydantic; issue 47).
"""
