// placeholder: implemented by its component's owner
