"""The serving loop's data layer (docs/architecture.md, docs/serving.md):

store            every statement of lease / submit / next HIT, one named function each
protocol_state   the one codec between PairState rows and protocol.adaptive state
"""
