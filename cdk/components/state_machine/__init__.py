"""The parts of the pipeline state machine (`cdk.components.pipeline_state_machine` composes them): one construct
per concern, each adding its states and, through `grant`, what the state machine's role needs for them."""
