"""The `will-it-scale` family (its code: .family; its report view: .view).

The package itself imports nothing, so that `report scaling` and `report html` reach the view hook
without the family's parameter model (pydantic; issue 47). The one name the view and the family
share is here.
"""

WORKLOAD = "will-it-scale.workload"      # ops/s of all tasks: the figure the scaling curves plot
