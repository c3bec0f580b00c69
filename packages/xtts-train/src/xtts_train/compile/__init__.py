"""The compiled programs and what they cost, beneath the models that build them: the
compiler choice per device and role (`compiler`), the persistent compile cache and stored
traces (`compile_cache`, `traces`), the concurrent warm-up (`warmup`), name scopes of traced
ops (`naming`), memory estimates checked before anything compiles (`memory`) and the
process's own figures (`process`: RSS, start-up clock, the heap released after a compile).
Nothing here imports the models, runs or training."""
