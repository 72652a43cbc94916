"""Rendering what a camera sees: the scene as primitives (scene.py), drawn by moderngl on EGL (gl.py)
or, where no EGL context can be opened, by pybullet's TinyRenderer (tiny.py)."""
