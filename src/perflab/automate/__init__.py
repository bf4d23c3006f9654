"""Automation over the measuring and analysis layers: bisection, the regression robot and
the lab of many test boxes, all measuring commits through one Measurer.
"""
