"""The torch-free part of each trained family: ``configs.<family>`` holds its config dataclass
(defaults and architecture rules, in ``__post_init__``), the constants those rules read and
``point_names(depth)``, the names of its insertion points from the depth alone; optionally
``narrowest_stage(width)`` (a convolutional family: ``(base, channels)`` of its first stage, which the
config checks keep at 2 channels or more) and ``agreeing(model)`` (the fields under which its model keys
alone are judged: a llama's width a multiple of its head_dim).

The family's model module (``models.<family>``) builds its ``nn.Module`` from that dataclass; the
config checks and ``models.point_count`` read these modules only, so planning a workflow (and
validating its config) imports no torch.
"""
