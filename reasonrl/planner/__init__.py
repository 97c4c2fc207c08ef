"""Pre-flight planning (`reasonrl plan`): the model's shape from its config (`shape`), estimated memory
per device (`memory`), batch arithmetic and the mistakes visible before a run starts (`checks`), and a
measured step to compare with (`measure`).
"""
